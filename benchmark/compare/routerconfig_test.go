package compare

import (
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
)

func TestRouterConfigScalesPeriodsAndAppliesSettings(t *testing.T) {
	def := config.Default()
	c, err := RouterConfig(fleet.VariantSetup("scored", 1, "scoring.weights.prefix=0"), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.RefreshInterval.D(), def.RefreshInterval.D()/2; got != want {
		t.Errorf("refresh interval = %v, want %v", got, want)
	}
	if got, want := c.Telemetry.ScrapeInterval.D(), def.Telemetry.ScrapeInterval.D()/2; got != want {
		t.Errorf("scrape interval = %v, want %v", got, want)
	}
	if c.Scoring.Weights.Prefix != 0 || c.Strategy != "scored" {
		t.Errorf("strategy %q, prefix weight %v: want scored with the setting applied", c.Strategy, c.Scoring.Weights.Prefix)
	}
	// The emulations of the Gateway API Inference Extension scrape every
	// 50 ms of GPU time, floored at the router's 10 ms of wall time.
	g, err := RouterConfig(fleet.RouterSetup(emulate.QueueKVMaxScore), 0.15)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Telemetry.ScrapeInterval.D(); got != 10*time.Millisecond {
		t.Errorf("emulation's scrape interval at time scale 0.15 = %v, want the 10ms floor", got)
	}
	if _, err := RouterConfig(fleet.Setup{Name: "bad", Strategy: "scored", Settings: []string{"no.such.key=1"}}, 1); err == nil {
		t.Error("an unknown setting was accepted")
	}
}
