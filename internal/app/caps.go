package app

import (
	"time"

	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/telemetry"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// newLearner builds the learner of limits the telemetry monitor runs for
// the workers it monitors: with strategy predicted, the limits derived
// from each worker's latency model and its models' objectives (adaptive
// caps do not apply); else the adaptive-caps learner, which, off, lifts
// limits an earlier run left.
func newLearner(cfg config.Config, store state.LimitWriter) telemetry.Learner {
	if cfg.Strategy == scoring.Predicted {
		return caps.NewModelLearner(store, modelObjectives(cfg.SLO), nil)
	}
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

// modelObjectives are the objectives of a model's standard-priority
// requests that ask for none (slo.models, else slo.ttft and slo.tpot): the
// limits are sized for them; a request with tighter objectives is held to
// them by the claim's ceiling.
func modelObjectives(c config.SLO) func(model string) caps.Objectives {
	return func(model string) caps.Objectives {
		o := caps.Objectives{TTFT: c.TTFT.D(), TPOT: c.TPOT.D()}
		if t, ok := c.Models[model][state.PriorityStandard]; ok {
			if t.TTFT > 0 {
				o.TTFT = t.TTFT.D()
			}
			if t.TPOT > 0 {
				o.TPOT = t.TPOT.D()
			}
		}
		return o
	}
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

var (
	_ telemetry.Learner = (*caps.ModelBox)(nil)
	_ telemetry.Learner = (*caps.Learner)(nil)
)
