package config

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/llm-router/llm-router/state"
)

// SLO configures requests' latency objectives: the defaults, the bound on
// what a request's headers may ask for, and per-model and per-objective
// values. The objectives are recorded in each decision; placement and
// admission do not read them yet.
type SLO struct {
	// TTFT and TPOT are the objectives of a request that names none and
	// whose model, priority and objective have none configured.
	TTFT Duration `yaml:"ttft"`
	TPOT Duration `yaml:"tpot"`
	// MinTTFT and MinTPOT are the tightest objectives a request's headers
	// may ask for when its key sets no bound of its own (and with keys
	// off); tighter is clamped to them.
	MinTTFT Duration `yaml:"min_ttft"`
	MinTPOT Duration `yaml:"min_tpot"`
	// Models: model → priority → objectives.
	Models map[string]map[state.Priority]SLOTargets `yaml:"models"`
	// Objectives: llm-d inference objective name (the
	// x-llm-d-inference-objective header) → objectives.
	Objectives map[string]SLOTargets `yaml:"objectives"`
}

// SLOTargets is a TTFT and a TPOT objective; an unset one falls through to
// the next source.
type SLOTargets struct {
	TTFT Duration `yaml:"ttft"`
	TPOT Duration `yaml:"tpot"`
}

// maxSLO bounds every configured objective, as the headers are bounded.
const maxSLO = time.Hour

// defaultSLO: a 2s TTFT covers the prefill of a p99 conversation prompt
// (about 4,100 tokens: ~275ms on an A100 with Llama-3-8B, profiled step
// times) with room for a queue wait, and equals scoring.ttft_slo; a 100ms
// TPOT (10 tokens/s, faster than people read) holds on the slowest common
// GPU (A40, Llama-2-7B: ~30ms of linear layers plus ~60ms of KV reads per
// step at 64 conversation-length requests). The bounds: 500ms is about
// twice that p99 prefill on an A100, and 25ms about an A100's decode step
// with Llama-3-8B at 64 such requests (~11ms of linear layers, ~5ms of KV
// reads, with headroom); tighter than either only a lightly loaded worker
// delivers, so only a key that says so may ask for it.
func defaultSLO() SLO {
	return SLO{
		TTFT:    Duration(2 * time.Second),
		TPOT:    Duration(100 * time.Millisecond),
		MinTTFT: Duration(500 * time.Millisecond),
		MinTPOT: Duration(25 * time.Millisecond),
	}
}

func (s SLO) validate(bad func(key, format string, args ...any)) {
	within := func(key string, d Duration, required bool) {
		switch {
		case d.D() == 0 && !required:
		case d.D() <= 0 || d.D() > maxSLO:
			bad(key, "must be above 0 and at most 1h, got %s", d)
		}
	}
	within("slo.ttft", s.TTFT, true)
	within("slo.tpot", s.TPOT, true)
	within("slo.min_ttft", s.MinTTFT, true)
	within("slo.min_tpot", s.MinTPOT, true)
	for _, model := range slices.Sorted(maps.Keys(s.Models)) {
		byPriority := s.Models[model]
		for _, p := range slices.Sorted(maps.Keys(byPriority)) {
			key := "slo.models." + model + "." + string(p)
			if !p.Valid() {
				bad(key, "want a priority: critical, standard or batch")
			}
			within(key+".ttft", byPriority[p].TTFT, false)
			within(key+".tpot", byPriority[p].TPOT, false)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Objectives)) {
		key := "slo.objectives." + name
		if name == "" {
			bad(key, "needs a name")
		}
		within(key+".ttft", s.Objectives[name].TTFT, false)
		within(key+".tpot", s.Objectives[name].TPOT, false)
	}
}

// validateKeyBounds checks a key's own objective bounds.
func validateKeyBounds(key string, k APIKey, bad func(key, format string, args ...any)) {
	for name, d := range map[string]Duration{"min_ttft_slo": k.MinTTFTSLO, "min_tpot_slo": k.MinTPOTSLO} {
		if d.D() < 0 || d.D() > maxSLO {
			bad(key+"."+name, "must be 0 (the slo bound) to 1h, got %s", d)
		}
	}
}

// KeyBoundError is validateKeyBounds for a single key, as an error (the
// keys file is checked where it is read).
func KeyBoundError(k APIKey) error {
	var err error
	validateKeyBounds("", k, func(key, format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%s: %s", key[1:], fmt.Sprintf(format, args...))
		}
	})
	return err
}
