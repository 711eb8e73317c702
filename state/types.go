package state

import (
	"errors"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
)

// WorkerSpec is a worker's static description, from config or registration.
type WorkerSpec struct {
	ID      string   `json:"id"`
	Address string   `json:"address"`
	Models  []string `json:"models"`
	Zone    string   `json:"zone,omitempty"`
	Region  string   `json:"region,omitempty"`
	// MaxConcurrency is the configured cap on the worker's in-flight
	// requests. 0 is no configured ceiling: only a learned Limit (if any)
	// bounds the worker, so a fleet can leave its caps to the limiter.
	MaxConcurrency int `json:"max_concurrency"`
	// Telemetry: the engine's metrics format (vllm, sglang, llamacpp,
	// trtllm, none), where to scrape and check it (defaults: the address's
	// /metrics and /health), and an optional DCGM exporter and GPU label.
	MetricsFormat string `json:"metrics_format,omitempty"`
	MetricsURL    string `json:"metrics_url,omitempty"`
	HealthURL     string `json:"health_url,omitempty"`
	DCGMURL       string `json:"dcgm_url,omitempty"`
	DCGMGPU       string `json:"dcgm_gpu,omitempty"`
	// KVBlocks is the worker's KV cache in 16-token blocks: the bound of
	// its prefix index and the capacity its token load is measured against
	// (0: DefaultKVBlocks).
	KVBlocks int `json:"kv_blocks,omitempty"`
	// PrefillTokensPerSecond is the worker's prefill rate, for the load
	// guard of prefix affinity (0: the scheduler's default).
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second,omitempty"`
	// Adapters are the LoRA adapters the worker's engine can serve, each
	// of a model in Models (its --lora-modules, or loadable when the
	// router manages adapters); MaxLoras its adapter slots (0: what the
	// engine reports, else scoring.DefaultMaxLoras). See adapters.go.
	Adapters []Adapter `json:"adapters,omitempty"`
	MaxLoras int       `json:"max_loras,omitempty"`
	// Role is the part of serving the worker does (pair.go; "": both).
	Role Role `json:"role,omitempty"`
}

// EMA is an exponential moving average with its sample count and the time of
// its last sample.
type EMA struct {
	Value   float64   `json:"value"`
	Samples int64     `json:"samples"`
	Updated time.Time `json:"updated"`
}

// Observe folds x into the average with smoothing alpha; the first sample
// sets the value.
func (e EMA) Observe(x, alpha float64, at time.Time) EMA {
	if e.Samples == 0 {
		e.Value = x
	} else {
		e.Value = alpha*x + (1-alpha)*e.Value
	}
	e.Samples++
	e.Updated = at
	return e
}

// Stats are a worker's request history.
type Stats struct {
	Latency      EMA   `json:"latency_seconds"`
	TTFT         EMA   `json:"ttft_seconds"`
	TokensPerSec EMA   `json:"tokens_per_second"`
	Requests     int64 `json:"requests"`
	Errors       int64 `json:"errors"`
}

// Worker is one worker's full state as a snapshot shows it.
type Worker struct {
	Spec     WorkerSpec     `json:"spec"`
	Health   scoring.Health `json:"health"`
	Draining bool           `json:"draining"`
	InFlight int            `json:"in_flight"`
	// In-flight tokens held by claims with a Prompt (all replicas).
	PrefillTokens int `json:"prefill_tokens"`
	DecodeTokens  int `json:"decode_tokens"`
	// AheadTokens is the part of PrefillTokens whose requests have not had
	// their first token (FirstTokener): the prefill a new request waits
	// behind.
	AheadTokens int `json:"ahead_tokens"`
	// PrefixBlocks is the size of the worker's prefix index (at most its
	// kv_blocks).
	PrefixBlocks int `json:"prefix_blocks"`
	// PredictedHitTokens counts the prompt tokens the prefix index
	// predicted cached on the worker (the matches of the claims it won),
	// to compare with the engine's own prefix-cache hits.
	PredictedHitTokens int64 `json:"predicted_hit_tokens"`
	// Limit is the worker's learned concurrency limit (adaptive caps;
	// Value 0: none, the configured cap applies).
	Limit     Limit     `json:"limit"`
	Stats     Stats     `json:"stats"`
	Telemetry Telemetry `json:"telemetry"`
	// LatencyStats are the latency model's statistics by model (Latencies).
	// In a snapshot they are read-only: a store may share them between
	// snapshots.
	LatencyStats map[string]latency.Stats `json:"latency_stats,omitempty"`
	// Adapters are the LoRA adapters placed on the worker (AdapterPlacement).
	Adapters []AdapterPlacement `json:"adapters,omitempty"`
	// Registered workers joined through the admin API and must heartbeat
	// before LeaseExpires; the others come from the config.
	Registered   bool      `json:"registered,omitempty"`
	LeaseExpires time.Time `json:"lease_expires,omitempty"`
}

// Sample is one measured value and when it was measured (zero At: never).
type Sample struct {
	Value float64   `json:"value"`
	At    time.Time `json:"at"`
}

// Known reports whether the sample exists and is no older than bound at now.
func (s Sample) Known(now time.Time, bound time.Duration) bool {
	return !s.At.IsZero() && now.Sub(s.At) <= bound
}

// Telemetry is what the worker's own metrics said when last scraped.
type Telemetry struct {
	KVUsage Sample `json:"kv_usage"` // fraction of the KV cache in use
	Waiting Sample `json:"waiting"`  // requests queued inside the engine
	Running Sample `json:"running"`
	GPUUtil Sample `json:"gpu_util"` // fraction, from DCGM
	// The engine's prefix cache against the router's prefix index
	// (internal/telemetry/prefix.go). PrefixHits is the engine's hit-token
	// counter, KVBlocks its KV cache in 16-token blocks, StartTime its
	// process start (unix seconds). HitMark and PredictedMark open the
	// current comparison window (the engine's and the index's hit tokens);
	// HitRatio is engine over predicted hits, smoothed over windows.
	PrefixHits    Sample `json:"prefix_hits,omitzero"`
	KVBlocks      Sample `json:"kv_blocks,omitzero"`
	StartTime     Sample `json:"start_time,omitzero"`
	HitMark       Sample `json:"hit_mark,omitzero"`
	PredictedMark Sample `json:"predicted_mark,omitzero"`
	HitRatio      Sample `json:"prefix_hit_ratio,omitzero"`
	// The engine's inter-token gaps against the SLO
	// (internal/telemetry/gaps.go): GapMark and SlowMark open the current
	// window (the engine's counts of gaps and of gaps over the SLO);
	// SlowShare is the last closed window's share of gaps over it.
	GapMark   Sample `json:"gap_mark,omitzero"`
	SlowMark  Sample `json:"slow_mark,omitzero"`
	SlowShare Sample `json:"slow_gap_share,omitzero"`
	// Adapters is what the engine reported of its LoRA adapters.
	Adapters AdapterReport `json:"adapters,omitzero"`
	At       time.Time     `json:"scraped_at"`
	By       string        `json:"scraped_by,omitempty"` // the replica that scraped
	Error    string        `json:"error,omitempty"`      // the last scrape's error
}

// Snapshot is every worker's state at one moment, read in one batch.
type Snapshot struct {
	Workers []Worker
	Queues  []QueueDepth // models with waiters
	At      time.Time
}

// Candidate is one worker offered to Claim with its score curve
// (Base + Slope·a)·(1 + Mult·a) at a live in-flight requests, plus
// scoring.LiveScore of its LiveWeights when the claim carries a Prompt.
// Lower wins; ties go to the earlier candidate.
type Candidate struct {
	Worker string
	// Cap is the configured cap (0: none, as WorkerSpec.MaxConcurrency);
	// the store lowers it to the worker's learned Limit.
	Cap   int
	Base  float64
	Slope float64
	Mult  float64
	// LiveWeights is the live part, scored on the figures the claim reads;
	// its KVBlocks bounds the worker's prefix index (0: DefaultKVBlocks).
	LiveWeights scoring.LiveWeights
	// Adapter prices the claim's adapter state on the worker (read and
	// recorded by the claim when ClaimRequest.Adapter is set).
	Adapter scoring.AdapterWeights
}

// Score evaluates the candidate's curve at a in-flight requests.
func (c Candidate) Score(a int) float64 {
	x := float64(a)
	return (c.Base + c.Slope*x) * (1 + c.Mult*x)
}

// Limits are a store's fleet-wide settings.
type Limits struct {
	// Lease is how long a claim or a queued waiter counts without being
	// renewed; its replica renews it every Lease/3.
	Lease time.Duration
	// GlobalCap bounds the requests in flight across the fleet (0: none).
	GlobalCap int
	Health    HealthPolicy
	// FairHalfLife halves the tenants' fair-queue counters (see
	// FairCost) every period, so that old service is forgotten; 0: they
	// never decay.
	FairHalfLife time.Duration
}

// HealthPolicy drives the health state machine: healthy → unhealthy after
// ActiveFailures failed checks or PassiveFailures failed requests in a row;
// unhealthy → recovering on a passing check after HoldDown; recovering
// (one request at a time) → healthy when it serves a request or passes a
// second check, back to unhealthy on any failure.
type HealthPolicy struct {
	ActiveFailures  int
	PassiveFailures int
	HoldDown        time.Duration
}

// DefaultLease is a claim's lease when none is set: the default of the
// config's claim_lease, and the fallback of the stores and the scheduler
// for callers that set none. Declared here, the lowest package that needs
// it, so that every layer takes the one value.
const DefaultLease = 10 * time.Second

// WithDefaults fills unset settings: DefaultLease, 3 failures either way.
func (l Limits) WithDefaults() Limits {
	if l.Lease <= 0 {
		l.Lease = DefaultLease
	}
	if l.Health.ActiveFailures <= 0 {
		l.Health.ActiveFailures = 3
	}
	if l.Health.PassiveFailures <= 0 {
		l.Health.PassiveFailures = 3
	}
	if l.Health.HoldDown < 0 {
		l.Health.HoldDown = 0
	}
	return l
}

// QueueSpec asks Claim to queue the request when nothing is available.
type QueueSpec struct {
	Model    string
	Priority Priority // its Rank orders the queue
	Allow    int      // the request may join while the queue is shorter than this
	Replica  string   // whose notifications channel hears about the grant
	// Tenant is whose share the request is served from within its
	// priority band ("": DefaultTenant); Cost is what its dispatch adds
	// to the tenant's counter (state.FairCost; 0 counts as 1).
	Tenant string
	Cost   float64
	// ChargedOutput is the output tokens counted in Cost, each adding
	// OutputCost: a release that reports fewer (Release.OutputTokens)
	// gives its tenant back the difference (state.FairRefund).
	ChargedOutput int
	OutputCost    float64
}

// FairTenant is the tenant the request counts against.
func (q QueueSpec) FairTenant() string {
	if q.Tenant == "" {
		return DefaultTenant
	}
	return q.Tenant
}

// FairCost is the charge of the request's dispatch: Cost, or 1 when unset.
func (q QueueSpec) FairCost() float64 {
	if q.Cost <= 0 {
		return 1
	}
	return q.Cost
}

// ClaimRequest asks for the best available candidate.
type ClaimRequest struct {
	ID         string // unique per request; also the lease's and waiter's name
	Candidates []Candidate
	Queue      *QueueSpec // nil: never queue
	// Prompt (zero: none) has the store read each candidate's prefix
	// match and token load, score them, record the prompt's blocks in the
	// winner's index and hold the request's tokens on it until the claim
	// ends (release, lapsed lease), its uncached prompt also as prefill
	// ahead (Worker.AheadTokens) until FirstToken. A queued waiter's
	// tokens are held from its grant, all of its prompt counted as
	// uncached.
	Prompt scoring.Prompt
	// Adapter (empty: none) is the LoRA adapter the request runs on: the
	// claim reads its state on every candidate (the worker's placements),
	// adds scoring.AdapterScore of each candidate's Adapter weights, and
	// places it on the winner (state.PlaceAdapter) for as long as the
	// claim is held; a queued waiter's adapter is not placed by its grant.
	Adapter string
}

// ReadsLive reports whether the claim asks for the live reads.
func (r ClaimRequest) ReadsLive() bool {
	return len(r.Prompt.Blocks) > 0 || r.Prompt.PromptTokens > 0 || r.Prompt.DecodeTokens > 0
}

// ClaimResult says which candidate was claimed (Index -1: none) and the
// live in-flight counts the choice was made on, before the claim.
type ClaimResult struct {
	Index     int
	Active    []int
	Available []bool // false: draining or not healthy at claim time
	Queued    bool   // waiting in the model's queue under the request's ID
	QueueFull bool   // nothing available and no room in the queue
	Position  int    // 1-based place in the queue when Queued
	// Live holds each candidate's prefix match and token load as the claim
	// read them, before the claim; nil when the claim had no Prompt.
	Live []scoring.Live
	// Adapter holds each candidate's adapter state as the claim read it
	// (before placing it); nil when the claim named no adapter. Evicted
	// is the placement the winner dropped to make room ("" none).
	Adapter []scoring.AdapterState
	Evicted string
}

// Notice tells a replica about one of its waiters: it was granted Worker
// (the claim is held under the waiter's ID), or shed from the queue.
type Notice struct {
	Waiter string
	Worker string
	Shed   bool
}

// WaiterState is where a waiter stands.
type WaiterState int

// Waiter states.
const (
	WaiterGone    WaiterState = iota // shed, or its lease lapsed
	WaiterQueued                     // still waiting
	WaiterGranted                    // holds a claim on Worker
	WaiterRemoved                    // Cancel took it out of the queue
)

// WaiterStatus is the answer of Poll and Cancel.
type WaiterStatus struct {
	State    WaiterState
	Worker   string
	Position int
}

// QueueDepth is one model's queue by priority.
type QueueDepth struct {
	Model                     string
	Critical, Standard, Batch int
}

// Release ends a claim and records what the request measured. Zero
// durations and rates mean "no sample".
type Release struct {
	ID string
	// Worker, when set, receives the measurements even if the claim is no
	// longer held (its lease lapsed during a store outage).
	Worker       string
	Failed       bool
	Latency      time.Duration
	TTFT         time.Duration
	TokensPerSec float64
	Alpha        float64
	// OutputTokens is the response's output tokens (0: unknown): the fair
	// queue charged the request its QueueSpec.ChargedOutput and gives its
	// tenant back what it did not produce.
	OutputTokens int
}

// LatencyContribution is what one measured request adds to its worker's
// latency statistics for its model (latency.Config.Contribution).
type LatencyContribution struct {
	Worker string
	Model  string
	Stats  latency.Stats
}

// Errors shared by both stores.
var (
	ErrUnknownWorker = errors.New("unknown worker")
	ErrUnknownClaim  = errors.New("unknown claim")
)

// ErrPoolMix: a worker serves models of different pools.
var ErrPoolMix = errors.New("worker spans pools")
