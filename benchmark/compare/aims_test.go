package compare

import (
	"testing"

	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
)

func TestReplicaHitAim(t *testing.T) {
	one := stats.Stats{HitRate: stats.Estimate{Value: 0.08, Seeds: []float64{0.07, 0.08, 0.09}}}
	close3 := stats.Stats{HitRate: stats.Estimate{Value: 0.075, Seeds: []float64{0.065, 0.075, 0.085}}}
	far3 := stats.Stats{HitRate: stats.Estimate{Value: 0.04, Seeds: []float64{0.03, 0.04, 0.05}}}
	if a := replicaHitAim(one, close3, 0.8); a.Verdict != stats.Met || a.Ratio.Value < 0.49 || a.Ratio.Value > 0.51 {
		t.Errorf("half a point apart: %+v", a)
	}
	if a := replicaHitAim(one, far3, 0.8); a.Verdict != stats.Missed {
		t.Errorf("four points apart: %+v", a)
	}
	def := "router " + config.Default().Strategy // the default strategy's setups are the router's own
	if !ownVariant(def+" x3") || !ownVariant(def) || ownVariant(def+"_other") || ownVariant("envoy LEAST_REQUEST") {
		t.Error("ownVariant")
	}
}
