package scheduler

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestGaugesStartAtZero: once a snapshot is published (Run does it after
// every refresh) every gauge family has a series for every known label value, 0 where nothing happened, so a
// dashboard shows 0 rather than "no data" (queueing off, no waiters, idle
// workers).
func TestGaugesStartAtZero(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 1), spec("b", "n", 1))
	s.publish(s.Snapshot())
	mfs, err := s.m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if got[mf.GetName()] == nil {
				got[mf.GetName()] = map[string]float64{}
			}
			got[mf.GetName()][labelKey(m)] = m.GetGauge().GetValue()
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
