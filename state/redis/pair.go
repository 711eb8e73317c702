package redis

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

//go:embed lua/claimpair.lua
var luaClaimPair string

// scriptClaimPair is claim.lua with pair_decide defined (claimpair.lua).
var scriptClaimPair = script(luaClaimPair + "\n" + luaClaim)

var _ state.PairClaimer = (*Store)(nil)

// ClaimPair claims a decode worker and, when the decider says so, a
// prefill worker in one script run (see claimpair.lua).
func (r *Store) ClaimPair(ctx context.Context, req state.PairRequest) (state.PairResult, error) {
	sh, args := r.claimArgs(ctx, req.ClaimRequest)
	args = append(args, max(0, req.MinUncached), packPrefill(req.Prefill))
	res, err := r.run(ctx, sh, scriptClaimPair, args...).Slice()
	if err != nil {
		return state.PairResult{}, fmt.Errorf("redis claim pair: %w", err)
	}
	if len(res) != 11 && len(res) != 12 {
		return state.PairResult{}, fmt.Errorf("redis claim pair: unexpected reply of %d parts", len(res))
	}
	out := state.PairResult{ClaimResult: r.claimResult(req.ClaimRequest, sh, res), PrefillIndex: -1}
	if len(res) == 11 {
		return out, nil
	}
	p, _ := res[11].([]any)
	if len(p) != 8 {
		return out, fmt.Errorf("redis claim pair: unexpected pair reply of %d parts", len(p))
	}
	u, _ := p[0].(int64)
	idx, _ := p[1].(int64)
	out.Uncached = int(u)
	if idx > 0 {
		out.PrefillIndex = int(idx) - 1
		r.where.noteID(state.PrefillClaimID(req.ID), sh)
	}
	active, _ := p[2].([]any)
	if len(active) == 0 {
		return out, nil
	}
	avail, _ := p[3].([]any)
	m, _ := p[4].([]any)
	q, _ := p[5].([]any)
	pre, _ := p[6].([]any)
	dec, _ := p[7].([]any)
	n := len(req.Prefill)
	out.PrefillActive, out.PrefillAvailable, out.PrefillLive = make([]int, n), make([]bool, n), make([]scoring.Live, n)
	for i := range n {
		out.PrefillActive[i] = intAt(active, i)
		out.PrefillAvailable[i] = intAt(avail, i) == 1
		out.PrefillLive[i] = scoring.Live{Match: intAt(m, i), Ahead: intAt(q, i), Prefill: intAt(pre, i), Decode: intAt(dec, i)}
	}
	return out, nil
}

// packPrefill is claimpair.lua's prefill candidates: {ids, caps, bases,
// slopes, ahead weights, uncached weights, index bounds}.
func packPrefill(ps []state.PrefillCandidate) string {
	fields := []func(state.PrefillCandidate) float64{
		func(p state.PrefillCandidate) float64 { return float64(p.Cap) },
		func(p state.PrefillCandidate) float64 { return p.Base },
		func(p state.PrefillCandidate) float64 { return p.Slope },
		func(p state.PrefillCandidate) float64 { return p.Ahead },
		func(p state.PrefillCandidate) float64 { return p.Uncached },
		func(p state.PrefillCandidate) float64 { return float64(p.Candidate().IndexBound()) },
	}
	n := len(ps)
	b := make([]byte, 0, 16+n*(24+len(fields)*9))
	b = arrayHeader(b, 1+len(fields))
	b = arrayHeader(b, n)
	for _, p := range ps {
		b = packString(b, p.Worker)
	}
	for _, field := range fields {
		b = arrayHeader(b, n)
		for _, p := range ps {
			b = append(b, 0xcb)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(field(p)))
		}
	}
	return string(b)
}
