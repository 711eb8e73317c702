package benchmark

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/stack"
)

// TestHarnessIntegration runs a miniature herd and comparison through the
// real processes (gpusim, Envoy, llm-router, redis-server) in about 30 s:
// the proof that the harness drives the real stack. Skipped in -short and
// when Envoy or redis-server is missing (`make deps` installs them).
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
		rep, err := Herd(ctx, HerdOptions{
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

	t.Run("compare", func(t *testing.T) {
		// A trace of short generations, so that runs take seconds.
		var b strings.Builder
		b.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
		for i := 0; i < 200; i++ {
			b.WriteString(strconv.Itoa(i) + "," + strconv.Itoa(100+7*i%400) + "," + strconv.Itoa(5+i%20) + "\n")
		}
		trace := filepath.Join(t.TempDir(), "trace.csv")
		if err := os.WriteFile(trace, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		results := t.TempDir()
		o := DefaultCompareOptions()
		o.BinDir, o.Fleet, o.ResultsDir = binDir, "h100-llama2-7b:1,a40-llama2-7b:1", results
		o.Workload.TracePath = trace
		o.Setups = []Setup{EnvoySetup("LEAST_REQUEST"), RouterSetup("scored")}
		o.Loads, o.Requests, o.ProbeRequests, o.MaxProbes, o.SizingRequests = []float64{0.3}, 40, 40, 1, 200
		o.Grace = 20 * time.Second
		rep, err := Compare(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Runs) != 2 || len(rep.Capacity.Probes) != 1 || rep.Capacity.Rate <= 0 {
			t.Fatalf("runs %d, capacity %+v", len(rep.Runs), rep.Capacity)
		}
		for _, r := range rep.Runs {
			s := r.Summary
			if s.OK == 0 || s.Errors != 0 || s.TTFTP50 <= 0 || len(r.CPU) < 3 || len(r.Inflight) == 0 {
				t.Errorf("%s: %+v, cpu %+v, %d samples", s.Setup, s, r.CPU, len(r.Inflight))
			}
		}
		if _, err := os.Stat(filepath.Join(results, "latest", "report.md")); err != nil {
			t.Error(err)
		}
	})
}
