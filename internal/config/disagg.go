package config

import (
	"strconv"

	"github.com/llm-router/llm-router/scheduler"
)

// Disaggregation configures prefill/decode disaggregation
// (docs/disaggregation.md). It applies to the models whose workers
// include prefill-only ones (workers[].role: prefill, or llm-d's
// llm-d.ai/role pod label).
type Disaggregation struct {
	// MinUncachedTokens is the decider's threshold: a request is
	// disaggregated when the prompt its decode worker's prefix cache
	// does not hold reaches it.
	MinUncachedTokens int `yaml:"min_uncached_tokens"`
}

func defaultDisaggregation() Disaggregation {
	return Disaggregation{MinUncachedTokens: scheduler.DefaultMinUncachedTokens}
}

func disaggregationKeys() []Key {
	return []Key{
		{Path: "disaggregation.min_uncached_tokens", Env: "DISAGGREGATION_MIN_UNCACHED_TOKENS", Default: strconv.Itoa(scheduler.DefaultMinUncachedTokens), Doc: "prefill/decode disaggregation, for models with prefill workers (workers[].role): a request's prefill runs on a prefill worker when the prompt tokens its decode worker's prefix cache does not hold reach this many, else on the decode worker; llm-d's prefix-based-pd-decider calls it nonCachedTokens and defaults to 0 (always), but this router's prefix index matches in 64-token groups, so under 64 fully cached prompts would be disaggregated too (docs/disaggregation.md)", apply: setInt(func(c *Config) *int { return &c.Disaggregation.MinUncachedTokens })},
	}
}

func (d Disaggregation) validate(bad func(key, format string, a ...any)) {
	if d.MinUncachedTokens < 0 {
		bad("disaggregation.min_uncached_tokens", "must be 0 or more, got %d", d.MinUncachedTokens)
	}
}
