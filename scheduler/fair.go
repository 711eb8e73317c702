package scheduler

import (
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Fair queuing: the store serves each priority band's tenants by their
// counters (state/fair.go); the scheduler names the tenant and what the
// request costs it.

// fairTenant is the tenant r counts against.
func (r Request) fairTenant() string {
	if r.Tenant == "" {
		return state.DefaultTenant
	}
	return r.Tenant
}

// fairCharge sets what r's dispatch charges its tenant: its prompt and
// twice its output bound (max_tokens, else scoring.DefaultOutputTokens),
// over the tenant's weight, an unverified tenant weighing 1; the release
// gives back the output not produced.
func (s *Scheduler) fairCharge(r Request, q *state.QueueSpec) {
	w := 1.0
	if !r.Unverified {
		if x, ok := s.opts.Queue.Weights[r.fairTenant()]; ok && x > 0 {
			w = x
		}
	}
	out := scoring.Job{MaxTokens: r.MaxTokens}.DecodeTokens()
	q.Tenant = r.fairTenant()
	q.Cost = state.FairCost(r.PromptTokens, out, w)
	q.ChargedOutput, q.OutputCost = out, 2/w
}
