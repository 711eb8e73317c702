package config

import (
	"fmt"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Fairness configures fair queuing between tenants within a priority band
// (docs/fairness.md).
type Fairness struct {
	// Weights is each tenant's share relative to others (default 1): a
	// tenant of weight 2 is served twice the tokens of one of weight 1
	// while both wait.
	Weights map[string]float64 `yaml:"weights"`
	// Decay is the half-life of the tenants' service counters; 0 keeps
	// them forever.
	Decay Duration `yaml:"decay"`
}

// DefaultFairDecay is queue.fairness.decay's default.
const DefaultFairDecay = Duration(time.Minute)

// Weight is tenant's weight (1 when not configured).
func (f Fairness) Weight(tenant string) float64 {
	if w, ok := f.Weights[tenant]; ok && w > 0 {
		return w
	}
	return 1
}

func (c *Config) validateFairness(bad func(string, string, ...any)) {
	f := c.Queue.Fairness
	for t, w := range f.Weights {
		if !state.ValidTenant(t) {
			bad("queue.fairness.weights."+t, "not a tenant name (1-%d letters, digits, '.', '_', '-', ':')", state.MaxTenantLen)
		}
		if w <= 0 || w > 1e6 {
			bad("queue.fairness.weights."+t, "must be in (0, 1e6], got %g", w)
		}
	}
	if f.Decay < 0 {
		bad("queue.fairness.decay", "must not be negative, got %s", f.Decay)
	}
	for i, k := range c.Auth.Keys {
		for j, id := range k.FairnessIDs {
			if !state.ValidTenant(id) {
				bad(fmt.Sprintf("auth.keys[%d].fairness_ids[%d]", i, j), "not a tenant name (1-%d letters, digits, '.', '_', '-', ':'), got %q", state.MaxTenantLen, id)
			}
		}
	}
}
