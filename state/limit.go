package state

import "encoding/json"

// Adaptive caps and prefix-index upkeep: what a worker's monitor (the
// replica holding its monitor lease) learns and writes back for every
// replica.
//
// A learned Limit lowers a worker's cap: both stores skip a worker whose
// in-flight count reached min(cap, Limit.Value) at claim time, and hand it
// no queued waiter past it. Its token limit does the same for the tokens
// claims hold (TokenRoom). Raising a limit frees slots, which go to
// waiters at once. Limits are soft state: a worker that leaves and comes
// back, or a Redis that restarts empty, starts again from its configured
// cap.

// Limit is a worker's learned limits as the stores keep and enforce them:
// the two numbers a claim checks atomically, and the limiter's own memory
// as an opaque blob (internal/caps computes all three and owns the blob's
// format).
type Limit struct {
	// Value is the learned limit, 1..max_concurrency (any positive count
	// when the worker has no configured cap); 0: none learned, the
	// configured cap applies.
	Value int `json:"value"`
	// Tokens is the learned in-flight token limit (see TokenRoom); 0: none.
	Tokens int64 `json:"tokens,omitempty"`
	// Limiter is the limiter's memory of the worker (estimates, baselines,
	// samples seen), stored and returned unread; nil: none.
	Limiter json.RawMessage `json:"limiter,omitempty"`
}

// IsZero reports whether l is no limit at all, with no limiter memory.
func (l Limit) IsZero() bool { return l.Value == 0 && l.Tokens == 0 && len(l.Limiter) == 0 }

// TokenRoom reports whether a worker holding inFlight claims with held
// tokens (uncached prompt plus max_tokens of the claims that carry token
// counts) may take one of need more under its learned token limit. A
// worker holding nothing always may: a request larger than the limit runs
// alone rather than never.
func (l Limit) TokenRoom(inFlight, held, need int) bool {
	return l.Tokens <= 0 || inFlight == 0 || int64(held)+int64(need) <= l.Tokens
}

// CapWith is cap lowered to a learned limit l; 0 is none for either, so
// with no configured cap the learned limit alone bounds (0: neither).
func CapWith(cap, l int) int {
	if l > 0 && (cap <= 0 || l < cap) {
		return l
	}
	return max(cap, 0)
}
