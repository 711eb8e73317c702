package overhead

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/test/stack"
)

// TestHarnessIntegration runs a miniature open-loop overhead benchmark
// through the real processes (gpusim, Envoy, the no-op ext_proc,
// llm-router). Skipped in -short and when Envoy is missing (`make deps`
// installs it).
func TestHarnessIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := stack.EnvoyBinary(); err != nil {
		t.Skip(err)
	}
	binDir := t.TempDir()
	if _, err := stack.Build(binDir, "llm-router", "gpusim", "llm-bench"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("overhead", func(t *testing.T) {
		// Envoy alone, the no-op ext_proc and the router, two rounds at one
		// low rate: every configuration answers, the floor's CPU is read
		// from its process, and each round's added latency is paired.
		rep, err := Open(ctx, OpenOptions{
			BinDir: binDir, Points: []RatePoint{{Rate: 50, Bytes: 1 << 10}}, Step: 500 * time.Millisecond,
			Rounds: 2, MaxP99: time.Second, MaxTokens: 4,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Steps) != 6 || len(rep.Added) != 4 || len(rep.Floor) != 2 {
			t.Fatalf("%d steps, %d added, floor %+v", len(rep.Steps), len(rep.Added), rep.Floor)
		}
		for _, s := range rep.Steps {
			if s.Failed != 0 || s.OK == 0 {
				t.Errorf("%s: %d ok, %d failed", s.Config, s.OK, s.Failed)
			}
		}
		for _, f := range rep.Floor {
			if len(f.CPUMicros.Rounds) != 2 || len(f.AddedP50.Rounds) != 2 {
				t.Errorf("%s: cpu %+v, added %+v", f.Config, f.CPUMicros, f.AddedP50)
			}
		}
		if rep.Floor[0].Config != configNoop || len(rep.Floor[1].P50Ratio.Rounds) != 2 {
			t.Errorf("floor %+v", rep.Floor)
		}
	})
}
