package failover

import (
	"context"

	"github.com/llm-router/llm-router/state"
)

var _ state.PairClaimer = (*Store)(nil)

// ClaimPair claims in Redis or, while degraded, locally, as Claim does;
// both claims of a pair are noted live, so a recovery adopts or releases
// each.
func (f *Store) ClaimPair(ctx context.Context, req state.PairRequest) (state.PairResult, error) {
	note := func(res state.PairResult) {
		if res.Index >= 0 {
			f.setLive(req.ID, req.Candidates[res.Index].Worker)
		}
		if res.PrefillIndex >= 0 {
			f.setLive(state.PrefillClaimID(req.ID), req.Prefill[res.PrefillIndex].Worker)
		}
	}
	for attempt := 0; ; attempt++ {
		if !f.Degraded() {
			res, err := f.primary.ClaimPair(ctx, req)
			if err == nil {
				note(res)
				return res, nil
			}
			f.noteReleased(req.ID)
			f.noteReleased(state.PrefillClaimID(req.ID))
			if !unavailable(ctx, err) || attempt > 0 {
				return res, err
			}
			f.mu.Lock()
			f.degradeLocked(err)
			f.mu.Unlock()
		}
		f.mu.Lock()
		if f.degraded {
			res, err := f.local.ClaimPair(ctx, req)
			if err == nil {
				note(res)
			}
			f.mu.Unlock()
			return res, err
		}
		f.mu.Unlock()
	}
}
