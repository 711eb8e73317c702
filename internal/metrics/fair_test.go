package metrics_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/scheduler"
)

// TestFairMetrics: service is prompt plus twice the completion per
// tenant; Jain's index is 1 for equal weighted service, (Σx)²/(n·Σx²)
// otherwise; tenants past the label bound count as other.
func TestFairMetrics(t *testing.T) {
	finish := func(m *metrics.Metrics, tenant string, prompt, completion int) {
		d := &scheduler.Decision{Tenant: tenant, Model: "m", PromptTokens: prompt}
		m.Finished(d, "w", 0, scheduler.Outcome{Status: 200, CompletionTokens: completion})
	}
	for _, tc := range []struct {
		name    string
		weights map[string]float64
		a, b    int // completion tokens of a's and b's request (prompts 0)
		want    float64
	}{
		{"equal", nil, 100, 100, 1},
		{"one takes three quarters", nil, 300, 100, 16.0 / 20},
		{"weights make 2:1 equal", map[string]float64{"a": 2}, 200, 100, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.NewOn(prometheus.NewRegistry())
			m.SetFairWeights(tc.weights)
			finish(m, "a", 0, tc.a)
			finish(m, "b", 0, tc.b)
			if got := value(m.FairnessJainIndex); math.Abs(got-tc.want) > 1e-3 {
				t.Fatalf("jain %g, want %g", got, tc.want)
			}
			if got := value(m.FairServiceTokens.WithLabelValues("a")); got != float64(2*tc.a) {
				t.Fatalf("a's service %g, want %d", got, 2*tc.a)
			}
		})
	}
	m := metrics.NewOn(prometheus.NewRegistry())
	for i := range 70 {
		finish(m, fmt.Sprintf("t%d", i), 10, 0)
	}
	if got := value(m.FairServiceTokens.WithLabelValues("other")); got != 60 {
		t.Fatalf("other's service %g, want 6 tenants × 10", got)
	}
}
