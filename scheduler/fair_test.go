package scheduler

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

func TestFairCost(t *testing.T) {
	s := &Scheduler{opts: Options{Queue: QueueOptions{Weights: map[string]float64{"gold": 4}}}}
	for _, tc := range []struct {
		name string
		r    Request
		want float64
	}{
		{"prompt plus twice max_tokens", Request{Tenant: "t", PromptTokens: 100, MaxTokens: 50}, 200},
		{"no max_tokens: the default output", Request{PromptTokens: 100}, float64(100 + 2*scoring.DefaultOutputTokens)},
		{"weighted", Request{Tenant: "gold", PromptTokens: 100, MaxTokens: 50}, 50},
		{"a header alone buys no weight", Request{Tenant: "gold", Unverified: true, PromptTokens: 100, MaxTokens: 50}, 200},
	} {
		if got := s.fairCost(tc.r); got != tc.want {
			t.Errorf("%s: cost %g, want %g", tc.name, got, tc.want)
		}
	}
	if got := (Request{}).fairTenant(); got != state.DefaultTenant {
		t.Errorf("tenant %q", got)
	}
}
