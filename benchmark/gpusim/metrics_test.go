package gpusim

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, h, body := get(t, base+"/metrics")
	if code != 200 || h.Get("x-gpusim-id") == "" {
		t.Fatalf("metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, body)
	}
	return fams
}

// value returns the value of the series of name with label model_name=m
// (or unlabelled when m is ""), and whether it exists.
func value(fams map[string]*dto.MetricFamily, name, m string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		lm := ""
		for _, l := range s.GetLabel() {
			if l.GetName() == "model_name" {
				lm = l.GetValue()
			}
		}
		if lm != m {
			continue
		}
		switch {
		case s.Gauge != nil:
			return s.GetGauge().GetValue(), true
		case s.Counter != nil:
			return s.GetCounter().GetValue(), true
		case s.Histogram != nil:
			return float64(s.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsMatchState(t *testing.T) {
	tests := []struct {
		format           string
		mut              func(*Config)
		running, waiting string
		kv               []string // fraction gauges
		absent           []string
		label            string // model_name label of the series, "" for none
	}{
		{
			FormatVLLM, nil, "vllm:num_requests_running", "vllm:num_requests_waiting",
			[]string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
			nil, "m",
		},
		{
			FormatVLLMLegacy, nil, "vllm:num_requests_running", "vllm:num_requests_waiting",
			[]string{"vllm:gpu_cache_usage_perc"},
			[]string{"vllm:kv_cache_usage_perc"},
			"m",
		},
		{
			FormatVLLMV1, func(c *Config) { c.Profile = "h100-llama2-7b" }, "vllm:num_requests_running", "vllm:num_requests_waiting",
			[]string{"vllm:kv_cache_usage_perc"},
			[]string{"vllm:gpu_cache_usage_perc"},
			"m",
		},
		{FormatSGLang, nil, "sglang:num_running_reqs", "sglang:num_queue_reqs", []string{"sglang:token_usage"}, nil, "m"},
		{
			FormatLlamaCpp, func(c *Config) { c.Slots = 2 }, "llamacpp:requests_processing", "llamacpp:requests_deferred",
			nil,
			[]string{"llamacpp:kv_cache_usage_ratio", "vllm:num_requests_running"},
			"",
		},
		{FormatTRTLLM, nil, "trtllm_num_requests_running", "trtllm_num_requests_waiting", []string{"trtllm_kv_cache_utilization"}, nil, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MetricsFormat = tt.format
			cfg.TTFTMs, cfg.MaxConcurrency, cfg.MaxNumSeqs = 1e9, 2, 2 // requests stay put
			if tt.mut != nil {
				tt.mut(&cfg)
			}
			srv, base := startServer(t, cfg)
			srv.Engine().SetKnobs(Knobs{Slowdown: 1e9, TTFTMs: cfg.TTFTMs})

			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel) // before the server's cleanup, which waits for streams
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := `{"model":"m","prompt":"x","gpusim_prompt_tokens":1000,"max_tokens":10,"stream":true}`
					resp, err := doPost(ctx, base+"/v1/completions", req)
					if err == nil {
						resp.Body.Close()
					}
				}()
			}
			// Simple and slots modes admit two at once; a calibrated GPU
			// admits whoever arrived before its (endless) first step.
			eventually(t, "3 requests queued or running", func() bool {
				st := adminState(t, base)
				return st.Running+st.Waiting == 3 && st.Running >= 1
			})
			check := func() {
				t.Helper()
				fams := scrape(t, base)
				st := adminState(t, base)
				if st.Running > 0 && st.KVUsedTokens < 500 || st.Running == 0 && st.KVUsedTokens != 0 {
					t.Errorf("kv used %d with %d running", st.KVUsedTokens, st.Running)
				}
				for name, w := range map[string]float64{tt.running: float64(st.Running), tt.waiting: float64(st.Waiting)} {
					if v, ok := value(fams, name, tt.label); !ok || v != w {
						t.Errorf("%s = %v (present %v), want %v", name, v, ok, w)
					}
				}
				for _, name := range tt.kv {
					if v, ok := value(fams, name, tt.label); !ok || v != st.KVUsage() {
						t.Errorf("%s = %v (present %v), want %v", name, v, ok, st.KVUsage())
					}
				}
				if tt.format == FormatSGLang {
					if v, _ := value(fams, "sglang:num_used_tokens", "m"); v != float64(st.KVUsedTokens) {
						t.Errorf("sglang:num_used_tokens = %v, want %d", v, st.KVUsedTokens)
					}
				}
				for _, name := range tt.absent {
					if _, ok := fams[name]; ok {
						t.Errorf("%s present", name)
					}
				}
			}
			check()
			cancel() // clients leave: KV and slots are freed at once
			wg.Wait()
			eventually(t, "all freed", func() bool {
				st := adminState(t, base)
				return st.Running == 0 && st.Waiting == 0
			})
			check()
		})
	}
}

func TestMetricsCounters(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0
	cfg.Models = []string{"a", "b"}
	_, base := startServer(t, cfg)
	for i := range 3 {
		body := fmt.Sprintf(`{"model":"a","prompt":"x","gpusim_prompt_tokens":7,"max_tokens":%d}`, 5+i)
		readAll(t, post(t, base+"/v1/completions", body))
	}
	readAll(t, post(t, base+"/v1/completions", `{"model":"b","prompt":"abcd"}`))
	fams := scrape(t, base)
	tests := []struct {
		name, model string
		want        float64
	}{
		{"vllm:prompt_tokens_total", "a", 21},
		{"vllm:generation_tokens_total", "a", 18},
		{"vllm:generation_tokens_total", "b", 16},
		{"vllm:time_to_first_token_seconds", "a", 3},
		{"vllm:e2e_request_latency_seconds", "b", 1},
		{"vllm:num_preemptions_total", "a", 0},
		{"vllm:prefix_cache_queries_total", "a", 21},
		{"vllm:prefix_cache_hits_total", "a", 0},
		{"vllm:gpu_prefix_cache_queries_total", "b", 1},
		// one gap fewer than the tokens: 4+5+6 and 15, under both names
		{"vllm:inter_token_latency_seconds", "a", 15},
		{"vllm:time_per_output_token_seconds", "b", 15},
	}
	for _, tt := range tests {
		if v, ok := value(fams, tt.name, tt.model); !ok || v != tt.want {
			t.Errorf("%s{model_name=%q} = %v (present %v), want %v", tt.name, tt.model, v, ok, tt.want)
		}
	}
	reasons := map[string]float64{}
	for _, s := range fams["vllm:request_success_total"].GetMetric() {
		var m, r string
		for _, l := range s.GetLabel() {
			switch l.GetName() {
			case "model_name":
				m = l.GetValue()
			case "finished_reason":
				r = l.GetValue()
			}
		}
		reasons[m+"/"+r] = s.GetCounter().GetValue()
	}
	if reasons["a/length"] != 3 || reasons["b/stop"] != 1 || reasons["a/stop"] != 0 {
		t.Errorf("request_success_total: %v", reasons)
	}
	if st := adminState(t, base); st.Completed != 4 || st.ServedTotal != 4 {
		t.Errorf("state %+v", st)
	}
}

func TestLabelEscaping(t *testing.T) {
	sn := snapshot{models: []string{`we"ird\name`}, perModel: map[string]modelStats{`we"ird\name`: *newModelStats()}}
	for _, f := range metricsFormats {
		p := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := p.TextToMetricFamilies(bytes.NewReader(renderMetrics(f, sn))); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
