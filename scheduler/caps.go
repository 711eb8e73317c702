package scheduler

import (
	"cmp"

	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/state"
)

// learnedCaps returns the learned concurrency limits of the model's
// workers that are below their configured caps (or have none), and their learned token
// limits (nil: none).
func (v *view) learnedCaps(model string) (caps map[string]int, tokens map[string]int64) {
	for _, j := range v.byModel[model] {
		w := v.snap.Workers[j]
		if l := w.Limit.Value; l > 0 && (w.Spec.MaxConcurrency <= 0 || l < w.Spec.MaxConcurrency) {
			if caps == nil {
				caps = map[string]int{}
			}
			caps[w.Spec.ID] = l
		}
		if t := w.Limit.Tokens; t > 0 {
			if tokens == nil {
				tokens = map[string]int64{}
			}
			tokens[w.Spec.ID] = t
		}
	}
	return caps, tokens
}

// learned logs worker → learned limit.
type learned[T int | int64] map[string]T

func (m learned[T]) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for w, l := range m {
		enc.AddInt64(w, int64(l))
	}
	return nil
}

// kvBlocks is a worker's KV capacity in blocks: what its engine reports
// (vLLM's num_gpu_blocks, scraped), else its spec's estimate, else the
// fleet default. It bounds the worker's prefix index and measures its
// token load.
func kvBlocks(w state.Worker, def fleetDefaults) int {
	if s := w.Telemetry.KVBlocks; !s.At.IsZero() && s.Value >= 1 {
		return int(s.Value)
	}
	return cmp.Or(w.Spec.KVBlocks, def.kvBlocks, state.DefaultKVBlocks)
}

// prefixTrust is the share of the prefix index's predicted hits the
// worker's engine confirmed (internal/telemetry's prefix check), at most 1;
// 0 when unknown (full trust). A ratio of 0 still counts a little, so the
// term keeps telling warm from cold should the engine come back.
func prefixTrust(w state.Worker) float64 {
	r := w.Telemetry.HitRatio
	if r.At.IsZero() {
		return 0
	}
	return min(1, max(0.05, r.Value))
}
