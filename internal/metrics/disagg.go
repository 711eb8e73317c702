package metrics

import "github.com/llm-router/llm-router/scheduler"

// labelsDisaggregation: placement is disaggregated or aggregated.
var labelsDisaggregation = []string{"model", "placement"}

// disaggregation counts a claimed decision of a model with prefill
// workers by its placement; other models' decisions have none.
func (m *Metrics) disaggregation(d *scheduler.Decision) {
	p := d.Disaggregation
	if p == nil {
		return
	}
	placement := "aggregated"
	if p.Disaggregated {
		placement = "disaggregated"
	}
	m.Disaggregation.WithLabelValues(d.Model, placement).Inc()
}
