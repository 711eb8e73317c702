package caps

import (
	"encoding/json"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Limit is a worker's learned limits with the limiter's memory: what Next
// works on. The store keeps Value and Tokens, which every replica enforces,
// and the rest as the opaque state.Limit.Limiter (see FromState, State).
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
	// Tokens is the learned in-flight token limit (state.Limit.TokenRoom);
	// 0: none. TokenEstimate is it before rounding down.
	Tokens        int64   `json:"tokens,omitempty"`
	TokenEstimate float64 `json:"token_estimate,omitempty"`
	// Basis is what the limit was learned from: BasisModel, or empty for
	// the latency gradient (Params.Next).
	Basis string `json:"basis,omitempty"`
	// Pending is, for a limit from the model, the computed limit waiting
	// to be taken (the one nearest Value since PendingSince: see settle);
	// 0: none.
	Pending      int       `json:"pending,omitempty"`
	PendingSince time.Time `json:"pending_since,omitzero"`
}

// BasisModel marks a limit derived from the worker's latency model and
// objectives (ModelBox).
const BasisModel = "latency_model"

// FromState reads a limit as the store keeps it. The store's Value and
// Tokens win over the memory's copy; a memory that does not decode
// (written by another version) is dropped, and the limiter starts again
// from the cap.
func FromState(s state.Limit) Limit {
	var l Limit
	if len(s.Limiter) > 0 && json.Unmarshal(s.Limiter, &l) != nil {
		l = Limit{}
	}
	l.Value, l.Tokens = s.Value, s.Tokens
	return l
}

// State is the limit as the store keeps it; the zero Limit is no limit.
func (l Limit) State() state.Limit {
	if l == (Limit{}) {
		return state.Limit{}
	}
	mem, err := json.Marshal(l)
	if err != nil { // a Limit always encodes; keep the numbers regardless
		mem = nil
	}
	return state.Limit{Value: l.Value, Tokens: l.Tokens, Limiter: mem}
}
