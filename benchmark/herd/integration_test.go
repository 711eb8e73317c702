package herd

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/test/stack"
)

// TestHarnessIntegration runs a miniature herd race through the real
// processes (gpusim, Envoy, two llm-router replicas, redis-server).
// Skipped in -short and when Envoy or redis-server is missing (`make deps`
// installs them).
func TestHarnessIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := stack.EnvoyBinary(); err != nil {
		t.Skip(err)
	}
	if _, err := stack.RedisBinary(); err != nil {
		t.Skip(err)
	}
	binDir := t.TempDir()
	if _, err := stack.Build(binDir, "llm-router", "gpusim"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("herd", func(t *testing.T) {
		rep, err := Run(ctx, Options{
			BinDir: binDir, Workers: 3, Bursts: 3, Strategies: []string{"least_loaded"}, Replicas: []int{2},
			Hold: 300 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != 2 {
			t.Fatalf("results %+v", rep.Results)
		}
		for _, r := range rep.Results {
			if r.Errors != 0 {
				t.Errorf("%+v: errors", r)
			}
			// The atomic claim's promise: never two on one GPU while
			// another idles, across replicas.
			if *r.AtomicClaim && r.Collisions != 0 {
				t.Errorf("atomic claim collided: %+v", r)
			}
		}
	})
}
