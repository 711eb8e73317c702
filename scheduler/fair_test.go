package scheduler

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

func TestFairCharge(t *testing.T) {
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
		var q state.QueueSpec
		s.fairCharge(tc.r, &q)
		if q.Cost != tc.want || q.OutputCost*float64(q.ChargedOutput) > q.Cost {
			t.Errorf("%s: cost %g (output part %d × %g), want %g", tc.name, q.Cost, q.ChargedOutput, q.OutputCost, tc.want)
		}
	}
	if got := (Request{}).fairTenant(); got != state.DefaultTenant {
		t.Errorf("tenant %q", got)
	}
}
