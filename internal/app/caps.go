package app

import (
	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/config"
)

// newLearner builds the adaptive-caps learner the telemetry monitor runs
// for the workers it monitors. Off, it lifts limits an earlier run left.
func newLearner(cfg config.Config, store caps.Store) *caps.Learner {
	a := cfg.AdaptiveCaps
	return caps.NewLearner(store, caps.Params{
		Tolerance:     a.TTFTTolerance,
		ITLTolerance:  a.ITLTolerance,
		MinSamples:    int64(a.MinSamples),
		Floor:         a.Floor,
		EngineWaiting: a.EngineWaiting,
	}, a.Enabled, nil)
}
