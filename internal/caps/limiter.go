// Package caps learns each worker's concurrency limit from what it shows,
// in the spirit of Envoy's adaptive-concurrency filter and Netflix's
// gradient limiters: while a worker's time to first token and inter-token
// latency stay within a tolerance of the lowest it has shown, its limit
// grows toward the configured max_concurrency; when they rise past it, the
// limit shrinks by the ratio, never below a floor of at least 1.
//
// The signals are the ones the router measures itself on every streamed
// response and folds into the worker's shared averages on release (TTFT
// from the claim to the first content token, and tokens/s, whose inverse
// is the inter-token latency): they are the same on every replica and
// need no engine metric. Non-streamed responses carry no TTFT, so a fleet
// serving only those never moves its limits off the cap.
//
// The limit lives in the shared store (state.Limit, with the limiter's
// memory, Limit, as an opaque blob there), so every replica enforces the
// same one. It is updated by the replica holding the worker's
// monitor lease, once per scrape cycle in which enough new samples
// arrived; the arithmetic is the pure function Params.Next.
package caps

import (
	"math"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Params tune the limiter. Zero values take the defaults.
type Params struct {
	// Tolerance: TTFT may rise to this multiple of its baseline before the
	// limit shrinks (default 2: prompts vary, and a queue of one prefill
	// already doubles a short prompt's TTFT).
	Tolerance float64
	// ITLTolerance is the same for the inter-token latency (default 1.5:
	// decode time grows slowly with the batch, so a steep rise means
	// thrashing).
	ITLTolerance float64
	// MinSamples new samples of an average are needed before it moves the
	// limit (default 8: the averages' smoothing is 0.2, so 8 new samples
	// are 83 % of the average).
	MinSamples int64
	// Floor is the lowest limit (default 1; a floor above a worker's cap
	// stops at the cap).
	Floor int
	// Drift raises each baseline by this fraction at every update in which
	// the recent value is above it, so a minimum measured long ago, or on
	// a lucky run of short prompts, is relearned (default 0.01).
	Drift float64
	// MinGradient bounds one update's cut (default 0.5: at most halved).
	MinGradient float64
	// EngineWaiting turns on the engine-queue signal: when the worker's
	// own metrics show more than this many requests waiting inside the
	// engine, the limit shrinks by the share it runs, running ÷ (running +
	// waiting). Zero is off (not a default), since only engines with
	// metrics report it.
	EngineWaiting float64
	// SlowGapShare turns on the tail inter-token signal: when a closed
	// window of the engine's gaps has more than this share over the
	// inter-token SLO (telemetry measures it), the limit shrinks by
	// SlowGapShare ÷ share; at or under it, the window counts as good
	// latency. Zero is off.
	SlowGapShare float64
	// TokenLimits learns an in-flight token limit beside the request
	// limit, moved by the same gradient (see Next).
	TokenLimits bool
}

func (p Params) withDefaults() Params {
	if p.Tolerance <= 1 {
		p.Tolerance = 2
	}
	if p.ITLTolerance <= 1 {
		p.ITLTolerance = 1.5
	}
	if p.MinSamples <= 0 {
		p.MinSamples = 8
	}
	if p.Floor < 1 {
		p.Floor = 1
	}
	if p.Drift <= 0 {
		p.Drift = 0.01
	}
	if p.MinGradient <= 0 || p.MinGradient >= 1 {
		p.MinGradient = 0.5
	}
	return p
}

// Observation is what the limiter sees of one worker at one update.
type Observation struct {
	Cap      int // the configured max_concurrency: the upper bound
	InFlight int // claims held now, all replicas
	// Tokens are the in-flight tokens those claims hold (uncached prompt
	// and max_tokens of the claims that carry token counts).
	Tokens       int
	TTFT         state.EMA // seconds, from the shared averages
	TokensPerSec state.EMA
	// Waiting and Running are the engine's own request counts from the
	// latest scrape (zero samples: not reported).
	Waiting, Running state.Sample
	// SlowShare is the share of the engine's inter-token gaps over the SLO
	// in its last closed window (zero sample: none).
	SlowShare state.Sample
}

// Next returns the worker's limit after observing o at now, and whether it
// changed (the limit or the limiter's memory). A worker with no limit yet
// starts at its cap: adaptive caps only ever lower what is configured.
//
// With n ≥ MinSamples new samples of an average, its baseline becomes
// min(baseline·(1+Drift), recent average): the lowest average seen, not
// the lowest single request, since one request's TTFT follows its prompt
// length (see docs/adaptive-caps.md, "Measured"). Its gradient is
// tolerance·baseline / recent average. The smaller gradient, within [MinGradient, 1], decides:
//
//   - below 1 (latency past tolerance): estimate ← estimate·gradient;
//   - 1, and the worker uses at least half its limit (not idle, so the
//     good latency says something about the limit): estimate ←
//     estimate + √estimate, the headroom of gradient limiters;
//
// then the estimate is clamped to [floor, cap] and the limit is its floor.
//
// With TokenLimits, the same gradient moves a token limit: requests of one
// worker may differ a hundredfold in the prompt and output tokens they
// bring, and its KV cache and prefill time follow the tokens. It starts at
// the first cut from what the request limit holds at the mix in flight
// then (tokens ÷ in-flight × estimate), is cut by the same gradient, grows
// by a factor 1 + 1/√estimate (the request limit's headroom, in
// proportion) while the worker holds at least half of it. It has no upper
// bound and is not lifted while the mix is light: only load near it says
// anything about it, and a limit kept through a spell of short requests is
// what stops the next spell of long ones from swamping the worker before
// any latency signal could.
func (p Params) Next(l Limit, o Observation, now time.Time) (Limit, bool) {
	p = p.withDefaults()
	if o.Cap <= 0 {
		return l, false
	}
	old := l
	floor := float64(min(p.Floor, o.Cap))
	if l.Value <= 0 || l.Estimate <= 0 {
		l.Estimate, l.Gradient = float64(o.Cap), 1
	}
	// The averages start again when a worker re-registers or the store
	// was emptied: so do the counts of samples seen.
	if o.TTFT.Samples < l.SeenTTFT || o.TokensPerSec.Samples < l.SeenTPS {
		l.SeenTTFT, l.SeenTPS = 0, 0
	}
	gradient, moved := 1.0, false
	if o.TTFT.Samples-l.SeenTTFT >= p.MinSamples && o.TTFT.Value > 0 {
		l.BaseTTFT = baseline(l.BaseTTFT, o.TTFT.Value, p.Drift)
		gradient = min(gradient, p.Tolerance*l.BaseTTFT/o.TTFT.Value)
		l.SeenTTFT, moved = o.TTFT.Samples, true
	}
	if o.TokensPerSec.Samples-l.SeenTPS >= p.MinSamples && o.TokensPerSec.Value > 0 {
		itl := 1 / o.TokensPerSec.Value
		l.BaseITL = baseline(l.BaseITL, itl, p.Drift)
		gradient = min(gradient, p.ITLTolerance*l.BaseITL/itl)
		l.SeenTPS, moved = o.TokensPerSec.Samples, true
	}
	// The engine-queue signal, once per scrape: a reading taken after the
	// last update. Requests waiting inside an engine wait in arrival order
	// for that one worker; held in the router's queue instead, they keep
	// their priority and go to whichever worker frees first. It only cuts:
	// growth needs the latency samples above, so a calm engine's limit
	// climbs back at the latency signals' pace.
	if p.EngineWaiting > 0 && o.Waiting.At.After(l.Updated) && o.Waiting.Value > p.EngineWaiting {
		gradient = min(gradient, o.Running.Value/(o.Running.Value+o.Waiting.Value))
		moved = true
	}
	// The tail inter-token signal, once per closed window: the share of
	// the engine's gaps over the SLO against its budget. A request fails a
	// p99 gap SLO on one or two slow gaps, so the budget is small and a
	// worker past it is cut in proportion; at or under it, the window is
	// good latency and lets the limit grow.
	if p.SlowGapShare > 0 && o.SlowShare.At.After(l.Updated) {
		if o.SlowShare.Value > p.SlowGapShare {
			gradient = min(gradient, p.SlowGapShare/o.SlowShare.Value)
		}
		moved = true
	}
	// Growth needs the tail's latest window within budget too: the mean
	// signals report every few requests and would otherwise climb back
	// between two windows what the last one cut.
	tailOK := p.SlowGapShare <= 0 || o.SlowShare.At.IsZero() || o.SlowShare.Value <= p.SlowGapShare
	if moved {
		gradient = max(p.MinGradient, min(1, gradient))
		if p.TokenLimits {
			l.TokenEstimate = p.nextTokens(l, o, gradient, tailOK)
		}
		switch {
		case gradient < 1:
			l.Estimate *= gradient
		case tailOK && float64(o.InFlight) >= l.Estimate/2:
			l.Estimate += math.Sqrt(l.Estimate)
		}
		l.Gradient, l.Updated = gradient, now
	}
	if !p.TokenLimits {
		l.TokenEstimate = 0
	}
	// A cap lowered in the config bounds the limit at once.
	l.Estimate = max(floor, min(float64(o.Cap), l.Estimate))
	l.Value = int(math.Floor(l.Estimate + 1e-9))
	l.Tokens = int64(math.Floor(l.TokenEstimate + 1e-9))
	return l, l != old
}

// nextTokens is the token limit's estimate after an update with gradient
// (see Next); l holds the request limit's estimate before the update.
func (p Params) nextTokens(l Limit, o Observation, gradient float64, tailOK bool) float64 {
	t := l.TokenEstimate
	if o.InFlight <= 0 || o.Tokens <= 0 {
		return t // nothing in flight tells the mix: no start, no growth
	}
	perRequest := float64(o.Tokens) / float64(o.InFlight)
	switch {
	case gradient < 1:
		if t <= 0 {
			t = perRequest * l.Estimate
		}
		return max(1, t*gradient)
	case t > 0 && tailOK && float64(o.Tokens) >= t/2:
		t *= 1 + 1/math.Sqrt(max(1, l.Estimate))
	}
	return t
}

// baseline is the lowest recent value, drifting up by drift a step toward
// a higher recent value.
func baseline(b, recent, drift float64) float64 {
	if b <= 0 || recent < b {
		return recent
	}
	return min(recent, b*(1+drift))
}
