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

// fairCost is what r's dispatch charges its tenant: its prompt and twice
// its output bound (max_tokens, else scoring.DefaultOutputTokens), over
// the tenant's weight; an unverified tenant weighs 1.
func (s *Scheduler) fairCost(r Request) float64 {
	w := 1.0
	if !r.Unverified {
		if x, ok := s.opts.Queue.Weights[r.fairTenant()]; ok && x > 0 {
			w = x
		}
	}
	job := scoring.Job{MaxTokens: r.MaxTokens}
	return state.FairCost(r.PromptTokens, job.DecodeTokens(), w)
}
