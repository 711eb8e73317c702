package telemetry

import (
	"errors"
	"math"
	"testing"
)

// The expositions below are written from the engines' documented metric
// names (vLLM V1 and older, SGLang, llama.cpp, TensorRT-LLM, DCGM).
const (
	vllmV1 = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-3-8b"} 3
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-3-8b"} 2
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="llama-3-8b"} 0.42
`
	vllmLegacy = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.77
`
	vllmTwoModels = `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 2
vllm:num_requests_waiting{model_name="b"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="a"} 0.3
vllm:kv_cache_usage_perc{model_name="b"} 0.3
`
	sglang = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 5
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 7
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.61
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m"} 1234.5
`
	llamacpp = `# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 4
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 9000
`
	trtllm = `# TYPE trtllm_num_requests_waiting gauge
trtllm_num_requests_waiting 1
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running 6
# TYPE trtllm_kv_cache_utilization gauge
trtllm_kv_cache_utilization 0.25
`
	dcgm = `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",Hostname="node-1"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbb",Hostname="node-1"} 12
`
)

func f(v float64) *float64 { return &v }

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name, format, text string
		want               Reading
	}{
		{"vLLM V1 names", FormatVLLM, vllmV1, Reading{KVUsage: f(0.42), Waiting: f(2), Running: f(3)}},
		{"vLLM before the rename", FormatVLLM, vllmLegacy, Reading{KVUsage: f(0.77), Waiting: f(0), Running: f(1)}},
		{"vLLM serving two models", FormatVLLM, vllmTwoModels, Reading{KVUsage: f(0.3), Waiting: f(5)}},
		{"SGLang", FormatSGLang, sglang, Reading{KVUsage: f(0.61), Waiting: f(7), Running: f(5)}},
		{"llama.cpp (no KV metric)", FormatLlamaCpp, llamacpp, Reading{Waiting: f(4), Running: f(2)}},
		{"TensorRT-LLM", FormatTRTLLM, trtllm, Reading{KVUsage: f(0.25), Waiting: f(1), Running: f(6)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetrics(tc.format, []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name      string
				got, want *float64
			}{{"kv", got.KVUsage, tc.want.KVUsage}, {"waiting", got.Waiting, tc.want.Waiting}, {"running", got.Running, tc.want.Running}} {
				switch {
				case (c.got == nil) != (c.want == nil):
					t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
				case c.got != nil && math.Abs(*c.got-*c.want) > 1e-9:
					t.Errorf("%s: got %v, want %v", c.name, *c.got, *c.want)
				}
			}
		})
	}
}

func TestParseMetricsRefusesTheWrongFormat(t *testing.T) {
	// A vLLM worker declared as SGLang: nothing matches, and that is an
	// error, never a silent zero.
	if _, err := ParseMetrics(FormatSGLang, []byte(vllmV1)); !errors.Is(err, ErrNoMetrics) {
		t.Fatalf("want ErrNoMetrics, got %v", err)
	}
	if _, err := ParseMetrics(FormatVLLM, []byte("not metrics {{{")); err == nil {
		t.Fatal("garbage parsed")
	}
	if _, err := ParseMetrics("tgi", []byte(vllmV1)); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestParseSlots(t *testing.T) {
	got, err := ParseSlots([]byte(`[{"id":0,"n_ctx":4096,"is_processing":true},{"id":1,"n_ctx":4096,"is_processing":false},
		{"id":2,"n_ctx":4096,"is_processing":true},{"id":3,"n_ctx":4096,"is_processing":false}]`))
	if err != nil || got != 0.5 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseSlots([]byte(`[]`)); err == nil {
		t.Fatal("no slots accepted")
	}
}

func TestParseDCGM(t *testing.T) {
	for gpu, want := range map[string]float64{"0": 0.87, "GPU-bbbb": 0.12} {
		got, err := ParseDCGM([]byte(dcgm), gpu)
		if err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("gpu %s: %v, %v; want %v", gpu, got, err, want)
		}
	}
	if _, err := ParseDCGM([]byte(dcgm), "7"); err == nil {
		t.Fatal("missing GPU accepted")
	}
}

func FuzzParseMetrics(f *testing.F) {
	for _, s := range []string{vllmV1, vllmLegacy, sglang, llamacpp, trtllm, dcgm, "", "# TYPE x gauge\nx NaN\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, format := range Formats {
			r, err := ParseMetrics(format, []byte(text))
			if err == nil && r.KVUsage != nil && (*r.KVUsage < 0 || *r.KVUsage > 1) {
				t.Fatalf("kv usage %v out of [0,1]", *r.KVUsage)
			}
		}
	})
}
