package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

var _ scheduler.Observer = (*Metrics)(nil)

// Decided counts a decision: picks by outcome, the time it took, a claim
// the live counts changed, and a queued request's wait.
func (m *Metrics) Decided(d *scheduler.Decision) {
	m.DecisionDuration.WithLabelValues(d.Strategy).Observe(d.DecideMicros / 1e6)
	m.Picks.WithLabelValues(d.Strategy, d.Outcome).Inc()
	if d.Conflict {
		m.ClaimConflicts.Inc()
	}
	if d.Outcome == scheduler.OutcomeClaimed && d.QueuePosition > 0 {
		m.QueueWait.WithLabelValues(d.Model, string(d.Priority)).Observe(d.WaitSeconds)
	}
	if d.Outcome == scheduler.OutcomeClaimed {
		m.fairWait(d)
		m.disaggregation(d)
	}
}

// Rejected counts a request the scheduler refused, by reason.
func (m *Metrics) Rejected(model, reason string) {
	m.RequestsRejected.WithLabelValues(model, reason).Inc()
}

// Finished counts a claimed request's end: its status (499 for a client
// that left before any), latency, worker, failures and tokens.
func (m *Metrics) Finished(d *scheduler.Decision, worker string, elapsed time.Duration, o scheduler.Outcome) {
	code := strconv.Itoa(o.Status)
	if o.Aborted && o.Status == 0 {
		code = "499"
	}
	m.RequestsTotal.WithLabelValues(d.Model, code).Inc()
	m.RequestLatency.WithLabelValues(d.Model).Observe(elapsed.Seconds())
	m.RequestsPerNode.WithLabelValues(worker).Inc()
	if o.UpstreamFailure {
		m.NodeFailures.WithLabelValues(worker).Inc()
	}
	if o.Status >= 400 && !o.Aborted {
		m.UpstreamErrors.WithLabelValues(code, worker).Inc()
	}
	if o.TTFT > 0 {
		m.TimeToFirstToken.WithLabelValues(worker).Observe(o.TTFT.Seconds())
	}
	if o.TokensPerSec > 0 {
		m.TokensPerSecond.WithLabelValues(worker).Observe(o.TokensPerSec)
	}
	if o.CompletionTokens > 0 {
		m.TokensGenerated.WithLabelValues(d.Model, worker).Add(float64(o.CompletionTokens))
	}
	if d.PromptTokens > 0 {
		m.TokensPrompt.WithLabelValues(d.Model, worker).Add(float64(d.PromptTokens))
	}
	m.fairFinished(d, o.CompletionTokens, time.Now())
}

// Moved counts a request Envoy served elsewhere: a failure of the worker
// it left.
func (m *Metrics) Moved(from, _ string) {
	m.RetriedElsewhere.WithLabelValues(from).Inc()
	m.NodeFailures.WithLabelValues(from).Inc()
}

// Published sets the snapshot's gauges. Every model a worker serves gets a
// series for every priority, and every worker for every health state, 0
// when nothing is there, so dashboards show 0 rather than "no data".
func (m *Metrics) Published(snap state.Snapshot, queueAllow [3]int) {
	healthy := map[string]int{}
	for _, w := range snap.Workers {
		for _, model := range w.Spec.Models {
			if w.Health == scoring.Healthy && !w.Draining {
				healthy[model]++
			} else {
				healthy[model] += 0
			}
		}
	}
	queues := map[string][3]int{}
	for _, q := range snap.Queues {
		queues[q.Model] = [3]int{q.Critical, q.Standard, q.Batch}
		healthy[q.Model] += 0 // waiters for a model no worker serves any more
	}
	m.QueueDepth.Reset()
	for model, n := range healthy {
		m.ModelHealthyWorkers.WithLabelValues(model).Set(float64(n))
		depth := queues[model]
		for i, p := range state.Priorities() {
			m.QueueCapacity.WithLabelValues(model, string(p)).Set(float64(queueAllow[i]))
			m.QueueDepth.WithLabelValues(model, string(p)).Set(float64(depth[i]))
		}
	}
	for _, w := range snap.Workers {
		m.NodeActiveRequests.WithLabelValues(w.Spec.ID).Set(float64(w.InFlight))
		// No series is no cap: a gauge cannot say "none", and 0 would
		// read as a worker that takes nothing.
		if c := state.CapWith(w.Spec.MaxConcurrency, w.Limit.Value); c > 0 {
			m.NodeConcurrencyLimit.WithLabelValues(w.Spec.ID).Set(float64(c))
		} else {
			m.NodeConcurrencyLimit.DeleteLabelValues(w.Spec.ID)
		}
		if r := w.Telemetry.HitRatio; !r.At.IsZero() {
			m.NodePrefixHitRatio.WithLabelValues(w.Spec.ID).Set(r.Value)
		}
		for _, h := range scoring.HealthStates() {
			v := 0.0
			if w.Health == h {
				v = 1
			}
			m.NodeHealth.WithLabelValues(w.Spec.ID, string(h)).Set(v)
		}
	}
}

// PredictionErrors sets the latency model's error quantiles, by target,
// once a target has a measurement.
func (m *Metrics) PredictionErrors(ttft, tpot latency.ErrorSummary) {
	for target, e := range map[string]latency.ErrorSummary{"ttft": ttft, "tpot": tpot} {
		if e.Count == 0 {
			continue
		}
		m.PredictionError.WithLabelValues(target, "p50").Set(e.Median)
		m.PredictionError.WithLabelValues(target, "p90").Set(e.P90)
	}
}

// ScoreTermSource gives each worker's score terms in the latest decision
// of each model it was a candidate for (the scheduler does).
type ScoreTermSource interface {
	LastScoreTerms() map[string][]scheduler.ModelTerm
}

// CollectScoreTerms exports src's terms as llm_router_node_score_term,
// read at scrape time so that decisions pay nothing for it.
func (m *Metrics) CollectScoreTerms(src ScoreTermSource) error {
	return m.Registry.Register(scoreTerms{src})
}

type scoreTerms struct{ src ScoreTermSource }

func (c scoreTerms) Describe(ch chan<- *prometheus.Desc) { ch <- ScoreTermDesc }

func (c scoreTerms) Collect(ch chan<- prometheus.Metric) {
	for worker, terms := range c.src.LastScoreTerms() {
		for _, t := range terms {
			if !t.Unknown {
				ch <- prometheus.MustNewConstMetric(ScoreTermDesc, prometheus.GaugeValue, t.Value, t.Model, worker, t.Name)
			}
		}
	}
}
