package compare

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/test/stack"
)

// TestHarnessIntegration runs miniature comparisons through the real
// processes (gpusim, Envoy, llm-router, redis-server) in about a minute:
// the proof that the harness drives the real stack. Skipped in -short and when Envoy or redis-server is missing
// (`make deps` installs them).
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
	if _, err := stack.Build(binDir, "llm-router", "gpusim", "llm-bench"); err != nil {
		t.Fatal(err)
	}
	// One bound for all five subtests: each takes 10-40 s on a quiet
	// 2-core host, and a loaded one stretches them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

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
		o := DefaultOptions()
		o.BinDir, o.Fleet, o.ResultsDir = binDir, "h100-llama2-7b:1,a40-llama2-7b:1", results
		o.Workload.TracePath = trace
		o.Setups = []fleet.Setup{fleet.EnvoySetup("LEAST_REQUEST"), fleet.RouterSetup("scored")}
		o.Loads, o.Requests, o.ProbeRequests, o.MaxProbes, o.SizingRequests = []float64{0.3}, 40, 40, 1, 200
		o.Seeds, o.ProbeCapacity = []uint64{1, 2}, true
		o.Grace = 20 * time.Second
		rep, err := Compare(ctx, o)
		if err != nil && !voidByMachine(err, rep) {
			t.Fatal(err)
		}
		if len(rep.Void) > 0 {
			t.Logf("void runs on this machine: %v", rep.Void)
		}
		if len(rep.Runs) != 4 || len(rep.Capacity.Probes) != 1 || rep.Capacity.Rate <= 0 || len(rep.SeedCapacity) != 2 {
			t.Fatalf("runs %d, capacity %+v, seed capacities %v", len(rep.Runs), rep.Capacity, rep.SeedCapacity)
		}
		for _, r := range rep.Runs {
			s := r.Summary
			if s.OK == 0 || s.Errors != 0 || s.TTFTP50 <= 0 || len(r.CPU) < 3 || len(r.Inflight) == 0 || len(s.LowerBounds) > 0 {
				t.Errorf("%s seed %d: %+v, cpu %+v, %d samples", s.Setup, r.Seed, s, r.CPU, len(r.Inflight))
			}
			// Unique prompts: nothing for the prefix caches to reuse.
			if r.HitRate > 0.01 {
				t.Errorf("%s seed %d: hit rate %.3f on a trace without reuse", s.Setup, r.Seed, r.HitRate)
			}
		}
		if len(rep.Stats) != 2 || len(rep.Stats[0].Seeds) != 2 || rep.Stats[0].TTFT[1].Hi < rep.Stats[0].TTFT[1].Lo {
			t.Errorf("stats %+v", rep.Stats)
		}
		if _, err := os.Stat(filepath.Join(results, "latest", "report-azure-conv.md")); err != nil {
			t.Error(err)
		}
	})

	t.Run("void", func(t *testing.T) {
		// Arrivals far beyond the fleet and a 1 ms bound no run keeps:
		// every seed is overload, every run void. Compare must still
		// write the whole report, plots included, and return ErrVoid
		// naming the cause.
		results := t.TempDir()
		o := DefaultOptions()
		o.Name, o.BinDir, o.Fleet, o.ResultsDir = "void", binDir, "h100-llama2-7b:1", results
		o.Setups = []fleet.Setup{fleet.EnvoySetup("LEAST_REQUEST")}
		o.Loads, o.Requests, o.Capacity, o.SizingRequests, o.Seeds = []float64{0.8}, 30, 500, 200, []uint64{1}
		o.CapacityTTFT, o.Grace = time.Millisecond, 200*time.Millisecond
		rep, err := Compare(ctx, o)
		if !errors.Is(err, report.ErrVoid) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "report: ") {
			t.Fatalf("err %v, want a one-line report.ErrVoid naming the report", err)
		}
		if len(rep.Overload) != 1 || len(rep.Runs) != 1 || len(rep.Runs[0].Void) == 0 || len(rep.Stats[0].Seeds) != 0 {
			t.Errorf("overload %v, runs %d, stats %+v", rep.Overload, len(rep.Runs), rep.Stats)
		}
		for _, f := range compareFiles("void") {
			if st, err := os.Stat(filepath.Join(results, "latest", f)); err != nil || st.Size() == 0 {
				t.Errorf("latest/%s: %v", f, err)
			}
		}
	})

	t.Run("prefix", func(t *testing.T) {
		// The Mooncake trace at 1/16 of its lengths: the GIE prefix
		// emulation with three replicas (each its own index, on one
		// redis-server) against Envoy, and the fleet's caches must hit.
		o := DefaultOptions()
		o.Name, o.BinDir, o.Fleet, o.ResultsDir = "mini-mooncake", binDir, "a100-llama3-8b:2", ""
		o.Workload = loadgen.WorkloadOptions{TracePath: "../traces/mooncake-conversation.jsonl", TokenScale: 1.0 / 16}
		o.Setups = []fleet.Setup{fleet.EnvoySetup("ROUND_ROBIN"), fleet.RouterReplicasSetup("prefix_queue_kv_max_score", 3)}
		o.Loads, o.Requests, o.Capacity, o.SizingRequests, o.Seeds = []float64{0.5}, 60, 40, 200, []uint64{1}
		o.Grace = 20 * time.Second
		rep, err := Compare(ctx, o)
		if err != nil && !voidByMachine(err, rep) {
			t.Fatal(err)
		}
		if rep.Ceilings == nil || rep.Ceilings.Trace < 0.3 || rep.Ceilings.Fleet[1] <= 0 {
			t.Fatalf("ceilings %+v", rep.Ceilings)
		}
		for _, r := range rep.Runs {
			if r.Summary.Errors != 0 || r.HitRate <= 0 {
				t.Errorf("%s: %d errors, hit rate %.3f", r.Summary.Setup, r.Summary.Errors, r.HitRate)
			}
		}
	})
}

// voidByMachine reports whether err is a comparison voided by the machine
// alone: a machine shared with other work may void every run (busy, slow,
// late), and the runs' figures are still checked. Overload is not expected
// at the loads these tests offer, so it fails them.
func voidByMachine(err error, rep *report.Report) bool {
	return errors.Is(err, report.ErrVoid) && rep != nil && len(rep.Overload) == 0
}
