package metrics

import (
	"context"

	"github.com/llm-router/llm-router/state"
)

var _ state.PairClaimer = (*countedStore)(nil)

// ClaimPair is counted as a claim: one round trip. A store that cannot
// pair claims claims the decode worker alone (aggregated).
func (c *countedStore) ClaimPair(ctx context.Context, req state.PairRequest) (state.PairResult, error) {
	var res state.PairResult
	var err error
	if pc, ok := c.Store.(state.PairClaimer); ok {
		res, err = pc.ClaimPair(ctx, req)
	} else {
		res.PrefillIndex = -1
		res.ClaimResult, err = c.Store.Claim(ctx, req.ClaimRequest)
	}
	c.claim.count(ctx, err)
	return res, err
}
