package sim

// The records of a run: what was asked (Run), what happened to each
// request (Result), and the run's counters (RunResult).

import (
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scheduler"
)

// Run is one run of a study: a fleet, a replica count, a strategy, a rate
// and a seed.
type Run struct {
	GPUs     []GPUClass `json:"gpus"`
	Engine   Engine     `json:"engine"`
	Replicas int        `json:"replicas"`
	Strategy string     `json:"strategy"`
	QPS      float64    `json:"qps"`
	Seed     uint64     `json:"seed"`
	Router   Router     `json:"router"`
	// Config is the replicas' router configuration (queue, objectives,
	// scoring weights); nil: the product's defaults. Router's periods
	// replace its own.
	Config *config.Config `json:"-"`
	// Adapters are the LoRA adapters every engine serves (a LoRA
	// workload's); the router sees each as a model of every worker.
	Adapters []string `json:"adapters,omitempty"`
	Disagg   Disagg   `json:"disagg,omitzero"`
}

// Outcomes of a request.
const (
	OutcomeOK = "ok"
	// OutcomeRefused: the router admitted it nowhere (every worker at its
	// cap, none healthy); a client would see 429 or 503.
	OutcomeRefused = "refused"
	// OutcomeTooLong: the GPU it was sent to could never fit it.
	OutcomeTooLong = "too_long"
	// OutcomeMissingAdapter: its LoRA adapter was served nowhere (the
	// router knew no worker for it, or the GPU had not registered it).
	OutcomeMissingAdapter = "missing_adapter"
)

// Result is what happened to one request. Times are virtual, from the
// start of the run.
type Result struct {
	Arrival    time.Duration `json:"arrival_ns"`
	FirstToken time.Duration `json:"first_token_ns"`
	Done       time.Duration `json:"done_ns"`
	Prompt     int           `json:"prompt_tokens"`
	Tokens     int           `json:"tokens"`
	// Cached are the prompt tokens the GPU's prefix cache held at the
	// request's first admission.
	Cached  int    `json:"cached_tokens"`
	GPU     int    `json:"gpu"` // index in the fleet; -1 when refused
	Replica int    `json:"replica"`
	Outcome string `json:"outcome"`
	// ITLP99 is the request's own 99th-percentile gap between consecutive
	// tokens, the inter-token figure llm-bench compare's goodput bounds;
	// 0 under two tokens or unless Engine.StreamSummary.
	ITLP99 time.Duration `json:"itl_p99_ns,omitempty"`
	// Gaps are the request's gaps between consecutive tokens, with
	// Engine.StreamSummary.
	Gaps []time.Duration `json:"-"`
	// Prefill is the GPU that ran the request's prefill when the router
	// disaggregated it, else -1; DecodeCached the prompt tokens the
	// decode GPU's prefix cache held when the router decided (pd.go).
	Prefill      int `json:"prefill_gpu"`
	DecodeCached int `json:"decode_cached_tokens"`
}

// TTFT is the time to first token.
func (r Result) TTFT() time.Duration { return r.FirstToken - r.Arrival }

// TPOT is the mean time per output token after the first (0 for one token).
func (r Result) TPOT() time.Duration {
	if r.Tokens < 2 {
		return 0
	}
	return (r.Done - r.FirstToken) / time.Duration(r.Tokens-1)
}

// RunResult is one run's requests and the fleet's counters. It holds no
// wall-clock figure: equal runs give equal results.
type RunResult struct {
	Run      Run      `json:"run"`
	Requests []Result `json:"-"`
	// PrefixQueries and PrefixHits are prompt tokens looked up in, and
	// found in, the GPUs' prefix caches (each request once).
	PrefixQueries uint64 `json:"prefix_queries"`
	PrefixHits    uint64 `json:"prefix_hits"`
	Preemptions   uint64 `json:"preemptions"`
	// Served counts the requests each GPU served, in fleet order.
	Served []int `json:"served"`
	// End is the virtual time of the last event; Events how many ran.
	End    time.Duration `json:"end_ns"`
	Events uint64        `json:"events"`
	// Decisions counts the replicas' decisions; SnapshotAge sums the age
	// of the snapshot each was made on; Conflicts counts those where the
	// live counts the claim read changed the worker the snapshot would
	// have picked (scheduler.Decision.Conflict).
	Decisions   int           `json:"decisions"`
	SnapshotAge time.Duration `json:"snapshot_age_sum_ns"`
	Conflicts   int           `json:"conflicts"`
	// Queued counts the decisions that waited in the router's queue, and
	// Waited sums their waits.
	Queued int           `json:"queued"`
	Waited time.Duration `json:"waited_sum_ns"`
	// Predictions are the latency model's errors on the run's requests
	// (prederr.go).
	Predictions predictionTally `json:"-"`
	// LoRALoads counts adapter loads (slot entries) over every GPU;
	// MissingAdapter the requests whose adapter was served nowhere.
	LoRALoads      uint64 `json:"lora_loads"`
	MissingAdapter int    `json:"missing_adapter"`
	// Misses explains the prefix cache's misses (misses.go); nil when no
	// prompt shared blocks with another.
	Misses *PrefixMisses `json:"prefix_misses,omitempty"`
}

// decisionTally is a scheduler.Recorder counting what RunResult reports
// of the decisions.
type decisionTally struct {
	decisions, conflicts, queued int
	age, waited                  time.Duration
	predictions                  predictionTally
}

var _ scheduler.Recorder = (*decisionTally)(nil)

// Record counts a decision; the second record of a request, at its end
// (Result set), is not one.
func (d *decisionTally) Record(dec *scheduler.Decision) {
	if dec.Result != nil {
		d.predictions.record(dec)
		return
	}
	if dec.QueuePosition > 0 {
		d.queued++
		d.waited += time.Duration(dec.WaitSeconds * float64(time.Second))
	}
	d.decisions++
	d.age += time.Duration(dec.SnapshotAge * float64(time.Second))
	if dec.Conflict {
		d.conflicts++
	}
}

// epoch is virtual time zero as the router's clock reads it.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
