package state

import (
	"context"
	"fmt"

	"github.com/llm-router/llm-router/scoring"
)

// Prefill/decode disaggregation (docs/disaggregation.md): a worker's Role
// says which part of serving it does, and a paired claim takes a decode
// worker and, when the request's prompt is worth prefilling elsewhere, a
// prefill worker with it, in one atomic step.

// Role is the part of serving a worker does, as llm-d's llm-d.ai/role pod
// label names it.
type Role string

// Roles. The zero value is RoleBoth.
const (
	// RoleBoth serves whole requests (prefill and decode): every worker
	// unless told otherwise. It is a decode candidate of a paired claim.
	RoleBoth Role = "both"
	// RoleDecode decodes: it takes requests as a RoleBoth worker does (a
	// routing sidecar beside it fetches the prompt's KV from the prefill
	// worker the router names, or prefills locally without one).
	RoleDecode Role = "decode"
	// RolePrefill only prefills: it is never sent a whole request, only
	// named to a decode worker's sidecar as the prefiller of a paired claim.
	RolePrefill Role = "prefill"
)

// ParseRole reads a role; "" is RoleBoth.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case "", RoleBoth:
		return RoleBoth, nil
	case RoleDecode, RolePrefill:
		return r, nil
	}
	return "", fmt.Errorf("role %q: want prefill, decode or both", s)
}

// OrBoth is the role with the zero value read as RoleBoth.
func (r Role) OrBoth() Role {
	if r == "" {
		return RoleBoth
	}
	return r
}

// Prefills reports whether the worker is a prefill candidate: RolePrefill
// only, so that a fleet of RoleBoth workers (the default) never
// disaggregates.
func (r Role) Prefills() bool { return r == RolePrefill }

// Decodes reports whether the worker takes whole requests (and is a decode
// candidate): every role but RolePrefill.
func (r Role) Decodes() bool { return r != RolePrefill }

// PrefillSuffix names a paired claim's prefill claim: the request's claim
// id plus this suffix. It is released on its own (Release with that id).
const PrefillSuffix = "/prefill"

// PrefillClaimID is the id of the prefill claim paired with claim id.
func PrefillClaimID(id string) string { return id + PrefillSuffix }

// PrefillCandidate is a prefill worker offered to ClaimPair. Its score is
// Base + Slope·a + Ahead·q + Uncached·u(m), a its live in-flight count, q
// the prefill ahead on it (Live.Ahead) and u(m) the request's prompt
// tokens past its prefix match m: the prefill it would compute before the
// request's first token, so the pick favours prefix hits and little
// queued prefill. Lower wins; ties go to the earlier candidate. It equals
// Candidate{Base, Slope, LiveWeights{Ahead, Uncached}} scored as Claim
// scores.
type PrefillCandidate struct {
	Worker   string
	Cap      int // configured cap (0: none), lowered by a learned Limit
	Base     float64
	Slope    float64
	Ahead    float64
	Uncached float64
	// KVBlocks bounds the worker's prefix index (0: DefaultKVBlocks).
	KVBlocks int
}

// Candidate is p as a Claim candidate: the same score, curve and live part.
func (p PrefillCandidate) Candidate() Candidate {
	return Candidate{
		Worker: p.Worker, Cap: p.Cap, Base: p.Base, Slope: p.Slope,
		LiveWeights: scoring.LiveWeights{Ahead: p.Ahead, Uncached: p.Uncached, KVBlocks: p.KVBlocks},
	}
}

// PairRequest asks for a decode worker, as ClaimRequest does, and with it a
// prefill worker when the request's prompt uncached on the decode worker
// claimed reaches MinUncached tokens (scoring.Disaggregate).
type PairRequest struct {
	// ClaimRequest is the decode side: its candidates are the decode
	// workers, its Prompt is required (the decider reads the match), and
	// the request queues as a Claim would (a waiter's grant is
	// aggregated: it holds no prefill claim).
	ClaimRequest
	Prefill     []PrefillCandidate
	MinUncached int
}

// PairResult is the decode side's ClaimResult and the prefill pick:
// PrefillIndex is the prefill candidate claimed under
// PrefillClaimID(ID), -1 when the request runs aggregated on the decode
// worker. Uncached is the prompt tokens the decode worker's match left
// (what the decider compared); Prefill* describe the prefill candidates
// as the claim read them (nil when the decider did not look: aggregated
// by the threshold, or no decode worker claimed).
type PairResult struct {
	ClaimResult
	Uncached         int
	PrefillIndex     int
	PrefillActive    []int
	PrefillAvailable []bool
	PrefillLive      []scoring.Live
}

// Disaggregated reports whether a prefill worker was claimed.
func (r PairResult) Disaggregated() bool { return r.PrefillIndex >= 0 }

// PairClaimer claims a decode worker and, when the decider says so, a
// prefill worker with it, atomically: both or neither are claimed, and no
// other claim of any replica interleaves. The decode worker is picked as
// Claim picks (curves and live part; a queued waiter is later granted
// alone, aggregated). Then, with u the prompt tokens its prefix match
// leaves, when u ≥ MinUncached the prefill candidates are read (health,
// drain, cap, live count, prefix match, prefill ahead) and the lowest
// PrefillCandidate score among those available and under their cap is
// claimed too. When none is, or the global cap has no room for a second
// claim, the request runs aggregated: the decode claim holds what Claim's
// would.
//
// Token load: the prefill claim holds the prompt past its own match as
// prefill (and as prefill ahead until its first token or release); a
// paired decode claim holds u plus the decode tokens as decode (the KV it
// receives and the output), none as prefill. Both workers' prefix indexes
// record the prompt. Each claim is released exactly once, on its own id,
// and lapses on its own lease.
type PairClaimer interface {
	ClaimPair(ctx context.Context, req PairRequest) (PairResult, error)
}

// PairTokens are the tokens a paired claim holds: pre and ahead on the
// prefill worker (its uncached prompt), dec on the decode worker (the
// prompt the decode worker's match left, u, plus the output).
func PairTokens(p scoring.Prompt, decodeMatch, prefillMatch int) (pre, dec int) {
	return p.Uncached(prefillMatch), p.Uncached(decodeMatch) + max(0, p.DecodeTokens)
}
