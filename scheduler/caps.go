package scheduler

import (
	"go.uber.org/zap/zapcore"
)

// learnedCaps returns the learned concurrency limits of the model's
// workers that are below their configured caps (nil: none).
func (v *view) learnedCaps(model string) map[string]int {
	var out map[string]int
	for _, j := range v.byModel[model] {
		w := v.snap.Workers[j]
		if l := w.Limit.Value; l > 0 && l < w.Spec.MaxConcurrency {
			if out == nil {
				out = map[string]int{}
			}
			out[w.Spec.ID] = l
		}
	}
	return out
}

// learnedCaps logs worker → learned limit.
type learnedCaps map[string]int

func (m learnedCaps) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for w, l := range m {
		enc.AddInt(w, l)
	}
	return nil
}
