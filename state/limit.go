package state

import "time"

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

// Limit is a worker's learned concurrency limit and the limiter's memory
// (internal/caps computes it; the stores keep and enforce it).
type Limit struct {
	// Value is the learned limit, 1..max_concurrency; 0: none learned, the
	// configured cap applies.
	Value int `json:"value"`
	// Estimate is the limit before rounding down; the limiter moves it in
	// fractions so that small caps still move.
	Estimate float64 `json:"estimate"`
	// Gradient is the last update's baseline-over-recent latency ratio
	// (0.5..1; 1: within tolerance).
	Gradient float64 `json:"gradient"`
	// BaseTTFT and BaseITL are the lowest recent TTFT and inter-token
	// latency seen (seconds), drifting up slowly so a stale minimum is
	// relearned.
	BaseTTFT float64 `json:"base_ttft_seconds"`
	BaseITL  float64 `json:"base_itl_seconds"`
	// SeenTTFT and SeenTPS are the worker's sample counts of the TTFT and
	// tokens/s averages at the last update: the limiter moves only once
	// enough new samples arrived.
	SeenTTFT int64     `json:"seen_ttft_samples"`
	SeenTPS  int64     `json:"seen_tps_samples"`
	Updated  time.Time `json:"updated"`
	// Tokens is the learned in-flight token limit (see TokenRoom); 0: none.
	// TokenEstimate is it before rounding down.
	Tokens        int64   `json:"tokens,omitempty"`
	TokenEstimate float64 `json:"token_estimate,omitempty"`
}

// TokenRoom reports whether a worker holding inFlight claims with held
// tokens (uncached prompt plus max_tokens of the claims that carry token
// counts) may take one of need more under its learned token limit. A
// worker holding nothing always may: a request larger than the limit runs
// alone rather than never.
func (l Limit) TokenRoom(inFlight, held, need int) bool {
	return l.Tokens <= 0 || inFlight == 0 || int64(held)+int64(need) <= l.Tokens
}

// PredictedHits is the prompt tokens a match of match leading blocks
// predicts the engine finds cached: the blocks' tokens, but never the
// prompt's last token, which engines always compute.
func (a Affinity) PredictedHits(match int) int64 {
	return int64(max(0, min(BlockTokens*match, a.PromptTokens-1)))
}

// CapWith is cap lowered to a learned limit l (0: none).
func CapWith(cap, l int) int {
	if l > 0 && l < cap {
		return l
	}
	return cap
}
