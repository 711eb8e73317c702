package app

import (
	"time"

	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

// newLearner builds the adaptive-caps learner the telemetry monitor runs
// for the workers it monitors. Off, it lifts limits an earlier run left.
func newLearner(cfg config.Config, store state.LimitWriter) *caps.Learner {
	a := cfg.AdaptiveCaps
	return caps.NewLearner(store, caps.Params{
		Tolerance:     a.TTFTTolerance,
		ITLTolerance:  a.ITLTolerance,
		MinSamples:    int64(a.MinSamples),
		Floor:         a.Floor,
		EngineWaiting: a.EngineWaiting,
		SlowGapShare:  slowGapShare(a),
		TokenLimits:   a.TokenLimits,
	}, a.Enabled, nil)
}

// slowGap is the inter-token SLO the monitor measures the engines' gaps
// against: only when adaptive caps use it.
func slowGap(cfg config.Config) time.Duration {
	if !cfg.AdaptiveCaps.Enabled {
		return 0
	}
	return cfg.AdaptiveCaps.ITLSLO.D()
}

// slowGapShare is the tail inter-token signal's budget, 0 (off) without
// an inter-token SLO.
func slowGapShare(a config.AdaptiveCaps) float64 {
	if a.ITLSLO.D() <= 0 {
		return 0
	}
	return a.SlowGapShare
}
