package config

// AdaptiveCaps configures the learning of each worker's concurrency limit
// from its TTFT and inter-token latency (internal/caps). Off by default:
// short benchmark runs on the Azure trace show it hurting
// (docs/adaptive-caps.md).
type AdaptiveCaps struct {
	Enabled bool `yaml:"enabled"`
	// TTFTTolerance and ITLTolerance: how far above its baseline a
	// worker's TTFT or inter-token latency may rise before its limit
	// shrinks (both > 1).
	TTFTTolerance float64 `yaml:"ttft_tolerance"`
	ITLTolerance  float64 `yaml:"itl_tolerance"`
	// MinSamples new samples of an average move the limit.
	MinSamples int `yaml:"min_samples"`
	// Floor is the lowest learned limit (at least 1).
	Floor int `yaml:"floor"`
	// EngineWaiting: requests a worker's engine may hold waiting (its
	// scraped num_requests_waiting) before its limit shrinks; 0 is off.
	EngineWaiting float64 `yaml:"engine_waiting"`
	// ITLSLO is the inter-token gap the tail signal counts against (0:
	// off), and SlowGapShare the share of gaps over it a worker may show
	// before its limit shrinks.
	ITLSLO       Duration `yaml:"itl_slo"`
	SlowGapShare float64  `yaml:"slow_gap_share"`
	// TokenLimits learns an in-flight token limit beside the request
	// limit (claims carry token counts under strategies with the prefix
	// or token-load term, scored by default; others only meet the request
	// limit).
	TokenLimits bool `yaml:"token_limits"`
}

func defaultAdaptiveCaps() AdaptiveCaps {
	return AdaptiveCaps{TTFTTolerance: 2, ITLTolerance: 1.5, MinSamples: 8, Floor: 1, EngineWaiting: 2, SlowGapShare: 0.0005, TokenLimits: true}
}

func (a AdaptiveCaps) validate(bad func(key, format string, args ...any)) {
	if a.TTFTTolerance <= 1 || a.ITLTolerance <= 1 {
		bad("adaptive_caps", "ttft_tolerance and itl_tolerance must be above 1, got %g and %g", a.TTFTTolerance, a.ITLTolerance)
	}
	if a.MinSamples < 1 {
		bad("adaptive_caps.min_samples", "must be at least 1, got %d", a.MinSamples)
	}
	if a.EngineWaiting < 0 {
		bad("adaptive_caps.engine_waiting", "must be 0 (off) or more, got %g", a.EngineWaiting)
	}
	if a.ITLSLO.D() < 0 {
		bad("adaptive_caps.itl_slo", "must be 0 (off) or more, got %s", a.ITLSLO.D())
	}
	if a.SlowGapShare <= 0 || a.SlowGapShare >= 1 {
		bad("adaptive_caps.slow_gap_share", "must be above 0 and below 1, got %g", a.SlowGapShare)
	}
	if a.Floor < 1 {
		bad("adaptive_caps.floor", "must be at least 1, got %d", a.Floor)
	}
}
