// Package metrics defines every Prometheus metric the router exports, on a
// registry it creates (never the global default), under one namespace:
// llm_router_. Label names are shared slices so the same label always has
// the same name.
//
// The scheduler and the ext_proc adapter know nothing of Prometheus: this
// package implements scheduler.Observer, and decorates the scheduler's
// store (CountStore) and the ext_proc server (CountStreams) so that each
// round trip and stream is counted in one place; internal/app wires them.
package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric name.
const Namespace = "llm_router"

var (
	labelsNode       = []string{"node"}
	labelsModel      = []string{"model"}
	labelsModelNode  = []string{"model", "node"}
	labelsCodeNode   = []string{"code", "node"}
	labelsRequest    = []string{"model", "code"}
	labelsReason     = []string{"model", "reason"}
	labelsPick       = []string{"strategy", "outcome"}
	labelsStoreOp    = []string{"op"}
	labelsPriority   = []string{"model", "priority"}
	labelsStrategy   = []string{"strategy"}
	labelsNodeHealth = []string{"node", "state"}
	labelsTargetStat = []string{"target", "stat"}
)

// Histogram buckets, as an earlier router design named them.
var (
	TTFTBuckets      = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5}
	TPSBuckets       = []float64{1, 5, 10, 25, 50, 100, 200, 500}
	LatencyBuckets   = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	DecisionBuckets  = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1}
	QueueWaitBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// ScoreTermDesc describes llm_router_node_score_term, collected at scrape
// time from each model's latest decision (see scheduler), so scoring pays
// nothing per decision for it.
var ScoreTermDesc = prometheus.NewDesc(Namespace+"_node_score_term",
	"Each score term of each worker (before weighting) in the latest decision for the model; unknown terms are omitted.",
	[]string{"model", "node", "term"}, nil)

// Metrics holds the router's collectors.
type Metrics struct {
	Registry *prometheus.Registry
	// Types maps every metric name this package defines (with the
	// namespace) to its type: counter, gauge or histogram.
	Types map[string]string

	// The request, queue and per-worker metrics an earlier router design
	// exported, under the same names.
	RequestsTotal        *prometheus.CounterVec   // model, code
	RequestLatency       *prometheus.HistogramVec // model
	QueueDepth           *prometheus.GaugeVec     // model, priority
	RequestsRejected     *prometheus.CounterVec   // model, reason
	RequestsPerNode      *prometheus.CounterVec   // node
	NodeActiveRequests   *prometheus.GaugeVec     // node
	NodeConcurrencyLimit *prometheus.GaugeVec     // node
	NodePrefixHitRatio   *prometheus.GaugeVec     // node
	NodeFailures         *prometheus.CounterVec   // node
	UpstreamErrors       *prometheus.CounterVec   // code, node
	TimeToFirstToken     *prometheus.HistogramVec // node
	TokensPerSecond      *prometheus.HistogramVec // node
	TokensGenerated      *prometheus.CounterVec   // model, node
	TokensPrompt         *prometheus.CounterVec   // model, node
	QueueWait            *prometheus.HistogramVec // model, priority
	DecisionDuration     *prometheus.HistogramVec // strategy
	Picks                *prometheus.CounterVec   // strategy, outcome
	ClaimConflicts       prometheus.Counter
	StoreRoundTrips      *prometheus.CounterVec // op
	StoreErrors          *prometheus.CounterVec // op
	StoreDegraded        prometheus.Gauge
	NodeHealth           *prometheus.GaugeVec // node, state
	ModelHealthyWorkers  *prometheus.GaugeVec // model
	QueueCapacity        *prometheus.GaugeVec // model, priority
	RetriedElsewhere     *prometheus.CounterVec
	Scrapes              *prometheus.CounterVec   // node, result
	ScrapeDuration       *prometheus.HistogramVec // format
	ExtProcStreamsActive prometheus.Gauge
	PredictionError      *prometheus.GaugeVec     // target, stat
	FairServiceTokens    *prometheus.CounterVec   // tenant
	FairWait             *prometheus.HistogramVec // tenant
	FairnessJainIndex    prometheus.Gauge
	FairnessIDsIgnored   prometheus.Counter
	// Disaggregation counts the claimed requests of models with prefill
	// workers by the decider's verdict (disagg.go).
	Disaggregation *prometheus.CounterVec // model, placement

	fair fairTracker
}

// New creates the collectors on a fresh registry, with the Go and process
// collectors beside them.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return NewOn(reg)
}

// NewOn registers the router's collectors on reg.
func NewOn(reg *prometheus.Registry) *Metrics {
	types := map[string]string{Namespace + "_node_score_term": "gauge"}
	f := factory{reg, types}
	return &Metrics{
		Registry:             reg,
		Types:                types,
		RequestsTotal:        f.counter("requests_total", "Requests the router decided on, by model and final HTTP status.", labelsRequest),
		RequestLatency:       f.histogram("request_latency_seconds", "End-to-end latency of requests as the router saw them, from the decision to the end of the response.", LatencyBuckets, labelsModel),
		QueueDepth:           f.gauge("queue_depth", "Requests waiting for a worker, fleet-wide, as of the last snapshot.", labelsPriority),
		RequestsRejected:     f.counter("requests_rejected_total", "Requests answered with an error by the router itself, by reason.", labelsReason),
		RequestsPerNode:      f.counter("requests_per_node_total", "Requests served per worker (the worker that actually served, after any Envoy retry).", labelsNode),
		NodeActiveRequests:   f.gauge("node_active_requests", "In-flight requests per worker across all replicas, as of the last snapshot.", labelsNode),
		NodeConcurrencyLimit: f.gauge("node_concurrency_limit", "Requests a worker may run at once: its max_concurrency, or the lower limit learned (adaptive caps, or from its latency model with strategy predicted), as of the last snapshot; no series: no cap (none).", labelsNode),
		NodePrefixHitRatio:   f.gauge("node_prefix_hit_ratio", "Prefix-cache hit tokens the worker's engine reported over those the router's prefix index predicted, smoothed; it scales the prefix term (workers reporting no prefix-cache metrics are absent).", labelsNode),
		NodeFailures:         f.counter("node_failures_total", "Requests that failed on a worker (5xx, reset or connect failure).", labelsNode),
		UpstreamErrors:       f.counter("upstream_errors_total", "Upstream error responses by HTTP status and worker.", labelsCodeNode),
		TimeToFirstToken:     f.histogram("time_to_first_token_seconds", "Time from the claim to the first content token of a streamed response.", TTFTBuckets, labelsNode),
		TokensPerSecond:      f.histogram("tokens_per_second", "Per-request decode rate of streamed responses.", TPSBuckets, labelsNode),
		TokensGenerated:      f.counter("tokens_generated_total", "Completion tokens generated.", labelsModelNode),
		TokensPrompt:         f.counter("tokens_prompt_total", "Prompt tokens sent.", labelsModelNode),
		QueueWait:            f.histogram("queue_wait_seconds", "Time requests spent waiting for a worker.", QueueWaitBuckets, labelsPriority),
		DecisionDuration:     f.histogram("decision_duration_seconds", "Time to score and claim a worker, store round trip included.", DecisionBuckets, labelsStrategy),
		Picks:                f.counter("picks_total", "Scheduling decisions by strategy and outcome.", labelsPick),
		ClaimConflicts:       f.counter1("claim_conflicts_total", "Claims where the live state changed the choice made on the cached snapshot."),
		StoreRoundTrips:      f.counter("store_round_trips_total", "Round trips to the state store by operation.", labelsStoreOp),
		StoreErrors:          f.counter("store_errors_total", "Failed state store operations.", labelsStoreOp),
		StoreDegraded:        f.gauge1("store_degraded", "1 while the shared store is unreachable and the router routes on local state."),
		NodeHealth:           f.gauge("node_health", "1 for the worker's current health state, 0 for the others.", labelsNodeHealth),
		ModelHealthyWorkers:  f.gauge("model_healthy_workers", "Workers serving the model that are healthy and not draining, as of the last snapshot.", labelsModel),
		QueueCapacity:        f.gauge("queue_capacity", "How many requests of each priority the model's queue admits (0: queueing off).", labelsPriority),
		Scrapes:              f.counter("scrapes_total", "Scrapes of workers' own metrics made by this replica, by result.", []string{"node", "result"}),
		ScrapeDuration:       f.histogram("scrape_duration_seconds", "Time to scrape one worker's metrics.", DecisionBuckets, []string{"format"}),
		RetriedElsewhere:     f.counter("retried_elsewhere_total", "Requests Envoy served on another worker than the one the router picked.", labelsNode),
		ExtProcStreamsActive: f.gauge1("extproc_streams_active",
			"Open ext_proc streams (one per HTTP request in flight through Envoy)."),
		FairServiceTokens:  f.counter("fair_service_tokens_total", "Service each tenant received, in tokens as the fair queue counts them: prompt plus twice the completion (tenants past the first 64 as other).", labelsTenant),
		FairWait:           f.histogram("fair_wait_seconds", "Time each tenant's claimed requests waited for a worker (0 for those claimed at once).", QueueWaitBuckets, labelsTenant),
		FairnessJainIndex:  f.gauge1("fairness_jain_index", "Jain's fairness index of the tenants' weighted service over the last half minute (half-life 30s): 1 when every active tenant is served alike, 1/n when one of n takes all."),
		FairnessIDsIgnored: f.counter1("fairness_ids_ignored_total", "Fairness id headers ignored because the request's API key does not allow them (the key's tenant stands)."),
		Disaggregation:     f.counter("disaggregation_decisions_total", "Claimed requests of models with prefill workers, by placement: disaggregated (a prefill worker claimed with the decode worker) or aggregated.", labelsDisaggregation),
		PredictionError:    f.gauge("prediction_error_ratio", "The latency model's absolute relative error, |predicted − measured| / measured, over this replica's last 1000 predictions of each target (ttft, tpot) on the claimed workers: its median (stat p50) and 90th percentile (p90); absent before any measurement.", labelsTargetStat),
	}
}

type factory struct {
	reg   *prometheus.Registry
	types map[string]string
}

func (f factory) counter(name, help string, labels []string) *prometheus.CounterVec {
	f.types[Namespace+"_"+name] = "counter"
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) counter1(name, help string) prometheus.Counter {
	f.types[Namespace+"_"+name] = "counter"
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string, labels []string) *prometheus.GaugeVec {
	f.types[Namespace+"_"+name] = "gauge"
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) gauge1(name, help string) prometheus.Gauge {
	f.types[Namespace+"_"+name] = "gauge"
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	f.types[Namespace+"_"+name] = "histogram"
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// Exported reports whether a series name is one the router exports: a
// metric of this package, a histogram's _bucket, _sum or _count series, or
// the Go and process collectors' (go_*, process_*).
func (m *Metrics) Exported(series string) bool {
	if _, ok := m.Types[series]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && m.Types[base] == "histogram" {
			return true
		}
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() == series && (strings.HasPrefix(series, "go_") || strings.HasPrefix(series, "process_")) {
			return true
		}
	}
	return false
}
