package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// TestGaugesStartAtZero: once a snapshot is published every gauge family
// has a series for every known label value, 0 where nothing happened, so a
// dashboard shows 0 rather than "no data" (queueing off, no waiters, idle
// workers).
func TestGaugesStartAtZero(t *testing.T) {
	m := metrics.New()
	snap := state.Snapshot{Workers: []state.Worker{
		{Spec: state.WorkerSpec{ID: "a", Models: []string{"m"}, MaxConcurrency: 1}, Health: scoring.Healthy},
		{Spec: state.WorkerSpec{ID: "b", Models: []string{"n"}, MaxConcurrency: 1}, Health: scoring.Healthy},
	}}
	m.Published(snap, [3]int{})
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			if got[mf.GetName()] == nil {
				got[mf.GetName()] = map[string]float64{}
			}
			got[mf.GetName()][labelKey(s)] = s.GetGauge().GetValue()
		}
	}
	want := map[string][]string{
		"llm_router_queue_depth": {
			"model=m,priority=critical", "model=m,priority=standard", "model=m,priority=batch",
			"model=n,priority=critical", "model=n,priority=standard", "model=n,priority=batch",
		},
		"llm_router_queue_capacity": {
			"model=m,priority=critical", "model=m,priority=standard", "model=m,priority=batch",
			"model=n,priority=critical", "model=n,priority=standard", "model=n,priority=batch",
		},
		"llm_router_node_active_requests": {"node=a", "node=b"},
	}
	for family, series := range want {
		for _, k := range series {
			v, ok := got[family][k]
			if !ok {
				t.Errorf("%s{%s} is absent; have %v", family, k, got[family])
				continue
			}
			if v != 0 {
				t.Errorf("%s{%s} = %v, want 0", family, k, v)
			}
		}
	}
}

// TestObserverCountsEachEventOnce: each scheduler event lands on its
// metrics, with the labels the dashboards and alerts read.
func TestObserverCountsEachEventOnce(t *testing.T) {
	m := metrics.New()
	claimed := &scheduler.Decision{
		Model: "m", Priority: state.PriorityBatch, Strategy: "scored", Outcome: scheduler.OutcomeClaimed, PromptTokens: 30,
		Disaggregation: &scheduler.PrefillDecision{Disaggregated: true, Worker: "p-0"},
	}
	queued := *claimed
	queued.QueuePosition, queued.WaitSeconds = 2, 0.3
	refused := &scheduler.Decision{Model: "m", Strategy: "scored", Outcome: scheduler.OutcomeQueueFull, Conflict: true}
	m.Decided(claimed)
	m.Decided(&queued)
	m.Decided(refused)
	m.Rejected("m", "queue_full")
	m.Finished(claimed, "gpu-0", time.Second, scheduler.Outcome{Status: 503, UpstreamFailure: true, CompletionTokens: 5})
	m.Finished(claimed, "gpu-0", time.Second, scheduler.Outcome{Aborted: true})
	m.Moved("gpu-1", "gpu-0")

	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"picks claimed", value(m.Picks.WithLabelValues("scored", "claimed")), 2},
		{"picks queue_full", value(m.Picks.WithLabelValues("scored", "queue_full")), 1},
		{"conflicts", value(m.ClaimConflicts), 1},
		{"disaggregated", value(m.Disaggregation.WithLabelValues("m", "disaggregated")), 2},
		{"rejected", value(m.RequestsRejected.WithLabelValues("m", "queue_full")), 1},
		{"requests 503", value(m.RequestsTotal.WithLabelValues("m", "503")), 1},
		{"requests 499", value(m.RequestsTotal.WithLabelValues("m", "499")), 1},
		{"upstream errors", value(m.UpstreamErrors.WithLabelValues("503", "gpu-0")), 1},
		{"failures gpu-0", value(m.NodeFailures.WithLabelValues("gpu-0")), 1},
		{"failures gpu-1", value(m.NodeFailures.WithLabelValues("gpu-1")), 1},
		{"retried elsewhere", value(m.RetriedElsewhere.WithLabelValues("gpu-1")), 1},
		{"prompt tokens", value(m.TokensPrompt.WithLabelValues("m", "gpu-0")), 60},
		{"completion tokens", value(m.TokensGenerated.WithLabelValues("m", "gpu-0")), 5},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Only the request that waited in the queue observes a wait.
	var h dto.Metric
	if err := m.QueueWait.WithLabelValues("m", "batch").(prometheus.Metric).Write(&h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 1 || sum != 0.3 {
		t.Errorf("queue wait: %d samples summing %v, want 1 of 0.3", n, sum)
	}
}

// TestScoreTermsAreCollectedAtScrape: the known terms of the source's
// latest decisions are exported, the unknown ones left out.
func TestScoreTermsAreCollectedAtScrape(t *testing.T) {
	m := metrics.New()
	src := terms{"gpu-0": {
		{Model: "m", Term: scoring.Term{Name: "active", Value: 2}},
		{Model: "m", Term: scoring.Term{Name: "norm_latency", Unknown: true}},
	}}
	if err := m.CollectScoreTerms(src); err != nil {
		t.Fatal(err)
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() == "llm_router_node_score_term" {
			for _, s := range mf.GetMetric() {
				got = append(got, labelKey(s))
			}
		}
	}
	if len(got) != 1 || got[0] != "model=m,node=gpu-0,term=active" {
		t.Errorf("score terms %v, want the known one only", got)
	}
}

type terms map[string][]scheduler.ModelTerm

func (t terms) LastScoreTerms() map[string][]scheduler.ModelTerm { return t }

func labelKey(m *dto.Metric) string {
	k := ""
	for i, l := range m.GetLabel() {
		if i > 0 {
			k += ","
		}
		k += l.GetName() + "=" + l.GetValue()
	}
	return k
}
