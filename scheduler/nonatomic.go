package scheduler

import (
	"context"
	"math"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file holds the one piece of the scheduler that exists for the
// benchmark only: the herd race (llm-bench herd) compares the atomic claim
// with this non-atomic one through the real llm-router binary, so it
// cannot live in the benchmark's own code. It runs only with
// atomic_claim: false, never on the default path.

// claimNonAtomic is the read-then-write claim every naive router does: it
// takes the worker the cached snapshot ranks best and claims it with no cap
// check against live counts. Only for the herd benchmark.
func (s *Scheduler) claimNonAtomic(ctx context.Context, id string, cands []scoring.Candidate, snapActive []int, pick int) (state.ClaimResult, error) {
	res := state.ClaimResult{Index: -1, Active: snapActive, Available: make([]bool, len(cands))}
	for i := range res.Available {
		res.Available[i] = true
	}
	if pick < 0 {
		return res, nil
	}
	one := toStateCandidates(cands[pick : pick+1])
	one[0].Cap = math.MaxInt32
	r, err := s.store.Claim(ctx, state.ClaimRequest{ID: id, Candidates: one})
	if err != nil || r.Index < 0 {
		return res, err
	}
	res.Index = pick
	return res, nil
}
