// Package telemetry feeds the scoring terms with the workers' own signals:
// it scrapes each worker's metrics in its serving engine's format (vLLM,
// SGLang, llama.cpp, TensorRT-LLM) and optionally a DCGM exporter, checks
// worker health, and writes what it saw to the shared store with the time
// it saw it, so every replica scores on the same, dated values and a stale
// value reads as unknown rather than as zero.
//
// With several replicas, each worker is monitored by one of them at a
// time: replicas take per-worker monitor leases in the store, so the
// scrape load is one scrape per worker per interval whatever the number of
// replicas, and a dead replica's workers are taken over within the lease.
package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Formats a worker may declare.
const (
	FormatVLLM     = "vllm"
	FormatSGLang   = "sglang"
	FormatLlamaCpp = "llamacpp"
	FormatTRTLLM   = "trtllm"
)

// Formats lists the accepted metrics formats.
var Formats = []string{FormatVLLM, FormatSGLang, FormatLlamaCpp, FormatTRTLLM}

// Reading is what one scrape of a worker found. A nil field was not found:
// the metric is absent (an engine version that renamed it), not zero.
type Reading struct {
	KVUsage *float64 // fraction 0..1 of the KV cache in use
	Waiting *float64 // requests queued inside the engine
	Running *float64 // requests in the running batch
	// The prefix-cache check (vLLM only; see prefix.go): prefix-cache hit
	// tokens since the engine started (a counter), its KV cache in 16-token
	// blocks, and its process start time (unix seconds).
	PrefixHits *float64
	KVBlocks   *float64
	StartTime  *float64
	// ITL is the engine's histogram of the gaps between a request's
	// tokens (vLLM only; see gaps.go), summed over its series.
	ITL *Histogram
	// Adapters is vLLM's LoRA gauge (lora.go).
	Adapters *AdapterReading
}

// ErrNoMetrics: the exposition had none of the format's metrics; a worker
// declared with the wrong format, or an engine that renamed everything.
var ErrNoMetrics = errors.New("none of the format's metrics found")

// names lists, per format and signal, the metric names to try in order.
// vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc in 2025; routers
// that read only one of the names silently read 0 on the other, so both are
// read, the newer first.
var names = map[string]struct{ kv, waiting, running []string }{
	FormatVLLM: {
		kv:      []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		waiting: []string{"vllm:num_requests_waiting"},
		running: []string{"vllm:num_requests_running"},
	},
	FormatSGLang: {
		kv:      []string{"sglang:token_usage"},
		waiting: []string{"sglang:num_queue_reqs"},
		running: []string{"sglang:num_running_reqs"},
	},
	// llama.cpp removed its KV metric: occupancy comes from GET /slots.
	FormatLlamaCpp: {
		waiting: []string{"llamacpp:requests_deferred"},
		running: []string{"llamacpp:requests_processing"},
	},
	FormatTRTLLM: {
		kv:      []string{"trtllm_kv_cache_utilization"},
		waiting: []string{"trtllm_num_requests_waiting"},
		running: []string{"trtllm_num_requests_running"},
	},
}

// ParseMetrics reads a Prometheus text exposition in the given format.
// Series labelled by model are summed (a worker serving several models).
func ParseMetrics(format string, text []byte) (Reading, error) {
	return parseMetrics(format, text, wanted, false)
}

// ParseMetricsWithGaps is ParseMetrics that also reads the engine's
// inter-token histogram (Reading.ITL): only the tail signal of adaptive
// caps needs it, and a histogram is most of what a parse would cost.
func ParseMetricsWithGaps(format string, text []byte) (Reading, error) {
	return parseMetrics(format, text, wantedWithGaps, true)
}

func parseMetrics(format string, text []byte, want map[string]map[string]bool, gaps bool) (Reading, error) {
	n, ok := names[format]
	if !ok {
		return Reading{}, fmt.Errorf("unknown metrics format %q", format)
	}
	fams, err := parseText(keepFamilies(text, want[format]))
	if err != nil {
		return Reading{}, err
	}
	r := Reading{
		KVUsage: firstOf(fams, n.kv, maxOf),
		Waiting: firstOf(fams, n.waiting, sum),
		Running: firstOf(fams, n.running, sum),
	}
	readEngineCache(format, fams, &r)
	r.Adapters = readLoRA(format, fams)
	if gaps && format == FormatVLLM {
		r.ITL = readHistogram(fams, itlNames)
	}
	if r.KVUsage == nil && r.Waiting == nil && r.Running == nil {
		return r, fmt.Errorf("%s: %w", format, ErrNoMetrics)
	}
	if r.KVUsage != nil {
		v := clamp01(*r.KVUsage)
		r.KVUsage = &v
	}
	return r, nil
}

// wanted lists, per format, every metric name ParseMetrics reads.
var wanted = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for format, n := range names {
		set := map[string]bool{}
		for _, list := range [][]string{n.kv, n.waiting, n.running} {
			for _, name := range list {
				set[name] = true
			}
		}
		out[format] = set
	}
	for _, name := range append([]string{loraName}, engineCacheNames...) {
		out[FormatVLLM][name] = true
	}
	return out
}()

// wantedWithGaps is wanted plus vLLM's inter-token histograms.
var wantedWithGaps = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for format, set := range wanted {
		out[format] = maps.Clone(set)
	}
	for _, name := range itlNames {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[FormatVLLM][name+suffix] = true
		}
	}
	return out
}()

// keepFamilies returns the lines of a text exposition that belong to the
// wanted metric families: their samples and their # HELP and # TYPE
// lines, unchanged. An engine's exposition is mostly histograms the router
// never reads (vLLM exports dozens); the text parser allocates for every
// sample and label it meets, and at the emulated Inference Extension's
// scrape rate it was half of the router's CPU. The kept lines are parsed
// by the same parser, so what is read does not change.
func keepFamilies(text []byte, want map[string]bool) []byte {
	out := make([]byte, 0, 1024)
	for len(text) > 0 {
		line, rest, _ := bytes.Cut(text, []byte{'\n'})
		text = rest
		if keepLine(line, want) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// keepLine reports whether one exposition line belongs to a wanted
// family. A sample line starting with '{' names its metric in quotes
// (the UTF-8 syntax): it is kept and left to the parser.
func keepLine(line []byte, want map[string]bool) bool {
	l := bytes.TrimLeft(line, " \t")
	if len(l) == 0 {
		return false
	}
	switch l[0] {
	case '#':
		// "# HELP name ..." or "# TYPE name kind"; a TYPE may name a
		// counter without its _total suffix.
		f := bytes.Fields(l[1:])
		if len(f) < 2 || (string(f[0]) != "HELP" && string(f[0]) != "TYPE") {
			return false
		}
		return want[string(f[1])] || want[string(f[1])+"_total"]
	case '{':
		return true
	}
	end := bytes.IndexAny(l, "{ \t")
	if end < 0 {
		end = len(l)
	}
	return want[string(l[:end])]
}

func parseText(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

func firstOf(fams map[string]*dto.MetricFamily, candidates []string, agg func([]float64) float64) *float64 {
	for _, name := range candidates {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			continue
		}
		var vs []float64
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				vs = append(vs, m.GetGauge().GetValue())
			case m.GetCounter() != nil:
				vs = append(vs, m.GetCounter().GetValue())
			case m.GetUntyped() != nil:
				vs = append(vs, m.GetUntyped().GetValue())
			}
		}
		if len(vs) == 0 {
			continue
		}
		v := agg(vs)
		return &v
	}
	return nil
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

func maxOf(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs[1:] {
		m = max(m, v)
	}
	return m
}

func clamp01(v float64) float64 { return min(1, max(0, v)) }

// ParseSlots derives llama.cpp KV occupancy from GET /slots: the share of
// slots processing. (Its per-slot context use is not exposed in every
// build; busy slots are what bound a llama.cpp server.)
func ParseSlots(body []byte) (float64, error) {
	var slots []struct {
		ID           int  `json:"id"`
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.Unmarshal(body, &slots); err != nil {
		return 0, fmt.Errorf("parse /slots: %w", err)
	}
	if len(slots) == 0 {
		return 0, errors.New("parse /slots: no slots")
	}
	busy := 0
	for _, s := range slots {
		if s.IsProcessing {
			busy++
		}
	}
	return float64(busy) / float64(len(slots)), nil
}

var dcgmWanted = map[string]bool{"DCGM_FI_DEV_GPU_UTIL": true}

// ParseDCGM reads DCGM_FI_DEV_GPU_UTIL (percent) for one GPU, matched by
// the value of its gpu or UUID label; the fraction 0..1 is returned.
func ParseDCGM(text []byte, gpu string) (float64, error) {
	fams, err := parseText(keepFamilies(text, dcgmWanted))
	if err != nil {
		return 0, err
	}
	f, ok := fams["DCGM_FI_DEV_GPU_UTIL"]
	if !ok {
		return 0, errors.New("DCGM_FI_DEV_GPU_UTIL not found")
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if (l.GetName() == "gpu" || l.GetName() == "UUID") && strings.EqualFold(l.GetValue(), gpu) {
				v := m.GetGauge().GetValue()
				if m.GetGauge() == nil {
					v = m.GetUntyped().GetValue()
				}
				return clamp01(v / 100), nil
			}
		}
	}
	return 0, fmt.Errorf("DCGM_FI_DEV_GPU_UTIL has no series for gpu %q", gpu)
}
