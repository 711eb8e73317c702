package scoring

import (
	"math"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
)

// DefaultOutputTokens stands in for max_tokens when a client sends none.
const DefaultOutputTokens = 256

// Job is what the router knows about the request being placed.
type Job struct {
	// Model is the base model the request runs on; Adapter, when set, is
	// the LoRA adapter of it the request named (see adapter.go).
	Model        string
	Adapter      string
	PromptTokens int // estimated from the body size
	MaxTokens    int // 0 when the client sent none
	// Blocks are the prompt's chained 16-token block hashes (see
	// scoring/prefix), bounded; nil when unknown or shorter than a block.
	// The prefix-aware emulations read them, and the store matches them when
	// a plan's candidates have live terms; the slice is shared, never
	// modified.
	Blocks []uint64
	// Objectives are the request's latency objectives (predicted enforces
	// them).
	Objectives Objectives
}

// Objectives are a request's latency objectives: its time to first token
// and its time per output token after it; 0 is none.
type Objectives struct {
	TTFT, TPOT time.Duration
}

// OutputEstimate is inference_aware's estimate of generated
// tokens: half of max_tokens, treating it as an upper bound.
func (j Job) OutputEstimate() float64 {
	if j.MaxTokens > 0 {
		return float64(j.MaxTokens) * 0.5
	}
	return DefaultOutputTokens * 0.5
}

// Signal is a measured value that may be unknown: never measured, or older
// than its staleness bound.
type Signal struct {
	Value float64
	Known bool
}

// Known returns a known signal.
func Known(v float64) Signal { return Signal{Value: v, Known: true} }

// Average is a moving average with its sample count and age.
type Average struct {
	Value   float64
	Samples int64
	Age     time.Duration // since the last sample
}

// Health is a worker's health as the router sees it.
type Health string

// Health states. Only Healthy workers receive new requests; Recovering is a
// worker that passed a check after failing and is on probation.
const (
	Healthy    Health = "healthy"
	Unhealthy  Health = "unhealthy"
	Recovering Health = "recovering"
)

// HealthStates lists every health state.
func HealthStates() [3]Health { return [3]Health{Healthy, Unhealthy, Recovering} }

// Worker is the scoring view of one candidate.
type Worker struct {
	ID       string
	Models   []string
	Health   Health
	Draining bool
	// Joining: the worker appeared moments ago and Envoy may not have its
	// cluster yet; it takes requests once the join delay has passed.
	Joining bool
	// MaxConcurrency is the worker's cap in force (0: none; see
	// Candidate.Cap).
	MaxConcurrency int
	// Active is the in-flight count from the snapshot. Strategies use it only
	// for explanation; the store evaluates curves on the live count.
	Active int
	// Recovering workers take one probe request at a time (the store
	// enforces it); they are eligible so the probe can happen.

	Queue      Signal // requests waiting inside the worker
	KVPressure Signal // 0..1
	GPUUtil    Signal // 0..1
	Distance   float64

	Latency      Average // end-to-end seconds
	TTFT         Average // seconds
	TokensPerSec Average

	// KVBlocks is the worker's KV capacity in 16-token blocks and
	// PrefillRate its prefill tokens per second, from its spec or the
	// configured defaults (0: unknown).
	KVBlocks    int
	PrefillRate float64
	// PrefixTrust is the share of the index's predicted prefix hits the
	// worker's engine confirms (0..1; 0: unknown, full trust).
	PrefixTrust float64
	// PrefillTokens and DecodeTokens are in flight in the snapshot, for
	// explanation only: the store scores the live figures. AheadTokens is
	// the part of PrefillTokens before its requests' first token.
	PrefillTokens, DecodeTokens, AheadTokens int
	// LatencyModels are the worker's fitted latency models by model
	// (scoring/latency), refitted at every snapshot; a model's entry is
	// Unknown while the worker has too little history for it. Shared,
	// never modified.
	LatencyModels map[string]latency.Model

	// Adapters are the LoRA adapters the worker can serve: configured,
	// reported by its engine, placed there, or loadable by the router
	// (see adapter.go). MaxLoras is its adapter slots (0:
	// DefaultMaxLoras), AdapterLoadSeconds the time a load adds before a
	// first token there (learned, or the prior).
	Adapters           []string
	MaxLoras           int
	AdapterLoadSeconds float64
}

// ServesAdapter reports whether w can serve adapter a.
func (w *Worker) ServesAdapter(a string) bool {
	for _, x := range w.Adapters {
		if x == a {
			return true
		}
	}
	return false
}

// Features are the latency model's inputs for placing j on w as the
// snapshot shows w: its in-flight load, and the whole prompt uncached (no
// prefix match is known before the claim reads it).
func (w *Worker) Features(j Job) latency.Features {
	return latency.Features{
		Running: w.Active, PrefillTokens: w.AheadTokens, DecodeTokens: w.DecodeTokens,
		Uncached: max(j.PromptTokens, 0), Output: j.DecodeTokens(),
	}
}

// LiveFeatures are the latency model's inputs for a claim that read l and
// active on the worker it took: what the request was placed on.
func LiveFeatures(p Prompt, active int, l Live) latency.Features {
	return latency.Features{
		Running: active, PrefillTokens: l.Ahead, DecodeTokens: l.Decode,
		Uncached: p.Uncached(l.Match), Output: p.DecodeTokens,
	}
}

// Serves reports whether w serves model.
func (w *Worker) Serves(model string) bool {
	for _, m := range w.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Curve is a worker's score as a function of its live in-flight count a:
// (Base + Slope·a)·(1 + Mult·a). Lower is better.
type Curve struct {
	Base  float64
	Slope float64
	Mult  float64
}

// At evaluates the curve at a in-flight requests.
func (c Curve) At(a int) float64 {
	x := float64(a)
	return (c.Base + c.Slope*x) * (1 + c.Mult*x)
}

// Infinite is the base given to a worker a strategy cannot score (no data).
// It is finite so that the store's arithmetic stays well defined; any worker
// with data beats it.
const Infinite = 1e300

// IsInfinite reports whether v stands for "no data".
func IsInfinite(v float64) bool { return v >= Infinite/10 || math.IsInf(v, 1) }

// Term is one named part of a score, for the decision log.
type Term struct {
	Name    string  `json:"name"`
	Weight  float64 `json:"weight"`
	Value   float64 `json:"value"`
	Unknown bool    `json:"unknown,omitempty"`
}

// Contribution is Weight·Value (0 when unknown).
func (t Term) Contribution() float64 {
	if t.Unknown {
		return 0
	}
	return t.Weight * t.Value
}

// Candidate is one eligible worker with its curve and the terms that do not
// depend on the live in-flight count.
type Candidate struct {
	Worker string
	// Cap is the in-flight count at which the candidate is full (Full).
	// 0 is no configured ceiling: only a learned limit, which the store
	// applies, bounds the worker.
	Cap   int
	Curve Curve
	Terms []Term
	// LiveTerms are scored by the store from live figures and added to the
	// curve; LiveWeights is their sum with the guard, trust and index
	// bound (see AddLive).
	LiveTerms   []LiveTerm
	LiveWeights LiveWeights
	// Adapter prices the request's adapter state on the worker, which
	// the store reads in the claim (zero: the request names no adapter).
	Adapter AdapterWeights
}

// Excluded is a worker that serves the model but was filtered out.
type Excluded struct {
	Worker string `json:"worker"`
	Reason string `json:"reason"`
}

// Plan is a strategy's output for one job: the candidates in a random tie
// order (index order is the tie-break) and what was filtered out.
type Plan struct {
	Strategy   string
	Fallback   string // set when the strategy fell back (inference_aware → least_loaded)
	Candidates []Candidate
	Excluded   []Excluded
}

// UsesLive reports whether any candidate needs the live prefix match and
// token figures (the claim must carry the job's Prompt).
func (p Plan) UsesLive() bool {
	for _, c := range p.Candidates {
		if c.LiveWeights.On() {
			return true
		}
	}
	return false
}
