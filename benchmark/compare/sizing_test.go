package compare

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
)

// TestSizeFleet sizes the profiles on a synthetic workload in virtual time:
// faster GPUs sustain more, and every cap is positive.
func TestSizeFleet(t *testing.T) {
	gpus, _ := fleet.Parse("h100-llama2-7b:2,a40-llama2-7b:1")
	w, err := loadgen.LoadWorkload(loadgen.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := SizeFleet(gpus, simRequests(w, w.Jobs(200, 1, 1)), nil, CapRule{}); err != nil {
		t.Fatal(err)
	}
	h, a := gpus[0], gpus[2]
	if gpus[1].Cap != h.Cap || gpus[1].SaturationRate != h.SaturationRate || h.SaturationRate <= a.SaturationRate || a.SaturationRate <= 0 || h.Cap < 1 || a.Cap < 1 {
		t.Errorf("sized %+v", gpus)
	}
	// The operator's view of each worker: an H100 holds more KV and
	// prefills faster than an A40 (same model, same memory utilisation).
	if a.KVBlocks <= 0 || h.KVBlocks <= a.KVBlocks || a.PrefillRate < 1000 || h.PrefillRate <= a.PrefillRate {
		t.Errorf("kv blocks %d/%d, prefill %.0f/%.0f tokens/s", h.KVBlocks, a.KVBlocks, h.PrefillRate, a.PrefillRate)
	}
	t.Logf("h100 %d blocks %.0f tok/s; a40 %d blocks %.0f tok/s", h.KVBlocks, h.PrefillRate, a.KVBlocks, a.PrefillRate)
	ws := fleet.Workers(gpus, 0)
	if ws[0].MaxConcurrency != h.Cap || ws[2].Models[0] != loadgen.Model || ws[0].KVBlocks != h.KVBlocks || ws[2].PrefillTokensPerSecond != a.PrefillRate {
		t.Errorf("workers %+v", ws)
	}
	if fleet.Workers(gpus, uncapped)[2].MaxConcurrency != uncapped {
		t.Error("cap override ignored")
	}
	if e := fleetEstimate(gpus); e < 2*h.SaturationRate {
		t.Errorf("estimate %g", e)
	}
}

// TestSizeFleetFitsTheITLSLO: a cap is sized at 90 % of saturation when
// the requests meet the inter-token SLO there, at a lower load when they do
// not, and never below 30 % (means held, to compare like with like).
func TestSizeFleetFitsTheITLSLO(t *testing.T) {
	w, err := loadgen.LoadWorkload(loadgen.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := simRequests(w, w.Jobs(300, 1, 1))
	size := func(itl time.Duration) []fleet.GPU {
		gpus, _ := fleet.Parse("h100-llama2-7b:1,a40-llama2-7b:1")
		if err := SizeFleet(gpus, reqs, nil, CapRule{ITL: itl, Mean: true}); err != nil {
			t.Fatal(err)
		}
		return gpus
	}
	free, slo, tight := size(0), size(stats.DefaultSLO().ITL), size(time.Millisecond)
	for i := range free {
		t.Logf("%s: cap %d at %.2f; with the SLO %d at %.2f; with 1 ms %d at %.2f", free[i].ID, free[i].Cap, free[i].CapLoad, slo[i].Cap, slo[i].CapLoad, tight[i].Cap, tight[i].CapLoad)
		if free[i].CapLoad != report.CapLoad || slo[i].Cap > free[i].Cap || slo[i].SaturationRate != free[i].SaturationRate {
			t.Errorf("%s: without an SLO %+v, with %+v", free[i].ID, free[i], slo[i])
		}
		if math.Abs(tight[i].CapLoad-report.CapLoadMin) > 1e-9 || tight[i].Cap >= free[i].Cap || tight[i].CapHeld != "mean, SLO unmet" {
			t.Errorf("%s: a 1 ms SLO no GPU meets sized %+v, want the floor load %.2f", tight[i].ID, tight[i], report.CapLoadMin)
		}
	}
}

func TestScaleResults(t *testing.T) {
	rs := []loadgen.Result{{Start: 4 * time.Second, TTFT: 400 * time.Millisecond, Latency: 8 * time.Second, ITLs: []time.Duration{40 * time.Millisecond}}}
	got := loadgen.ScaleResults(rs, 4)[0]
	if got.Start != time.Second || got.TTFT != 100*time.Millisecond || got.Latency != 2*time.Second || got.ITLs[0] != 10*time.Millisecond {
		t.Errorf("scaled %+v", got)
	}
	if rs[0].ITLs[0] != 40*time.Millisecond {
		t.Error("input modified")
	}
}

func TestBenchRouterConfigIsValid(t *testing.T) {
	for _, scale := range []float64{0.05, 0.15, 1, 4} {
		for _, s := range DefaultSetups() {
			c := config.Default()
			c.Workers = []config.Worker{{ID: "w", Address: "127.0.0.1:1", Models: []string{loadgen.Model}, MaxConcurrency: 1}}
			benchRouterConfig(s, &c, scale)
			if err := c.Validate(); err != nil {
				t.Errorf("%s at time scale %g: %v", s.Name, scale, err)
			}
		}
	}
}

func TestHeldQuantileWeighsByTime(t *testing.T) {
	s := time.Second
	// One request alone for 9.5 s, then two together for 0.5 s: by time,
	// 95 % of it with one. A rejected request never counts.
	res := []gpusim.SimResult{
		{Arrival: 0, Done: 10 * s},
		{Arrival: 9500 * time.Millisecond, Done: 10 * s},
		{Arrival: 0, Done: 10 * s, Rejected: true},
	}
	for _, c := range []struct {
		q    float64
		want int
	}{{0.5, 1}, {0.9, 1}, {0.99, 2}} {
		if got := heldQuantile(res, c.q); got != c.want {
			t.Errorf("held at q %.2f: %d, want %d", c.q, got, c.want)
		}
	}
	if got := heldQuantile(nil, 0.99); got != 0 {
		t.Errorf("nothing held: %d", got)
	}
}

// TestSizeFleetLeavesRoomForBurstsOnlyWhereTheSLODoesNotBound: room for bursts on a
// GPU that meets the SLO at 90 %, the mean at the sized load on one that
// does not.
func TestSizeFleetLeavesRoomForBurstsOnlyWhereTheSLODoesNotBound(t *testing.T) {
	w, err := loadgen.LoadWorkload(loadgen.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := simRequests(w, w.Jobs(300, 1, 1))
	mean, _ := fleet.Parse("h100-llama2-7b:1,a40-llama2-7b:1")
	burst, _ := fleet.Parse("h100-llama2-7b:1,a40-llama2-7b:1")
	if err := SizeFleet(mean, reqs, nil, CapRule{ITL: stats.DefaultSLO().ITL, Mean: true}); err != nil {
		t.Fatal(err)
	}
	if err := SizeFleet(burst, reqs, nil, DefaultCapRule()); err != nil {
		t.Fatal(err)
	}
	t.Logf("h100 %d -> %d, a40 %d -> %d", mean[0].Cap, burst[0].Cap, mean[1].Cap, burst[1].Cap)
	if mean[0].CapLoad != report.CapLoad || burst[0].Cap <= mean[0].Cap {
		t.Errorf("h100: mean cap %d at %.2f, burst cap %d", mean[0].Cap, mean[0].CapLoad, burst[0].Cap)
	}
	if mean[1].CapLoad >= report.CapLoad || burst[1].Cap != mean[1].Cap {
		t.Errorf("a40: mean cap %d at %.2f, burst cap %d", mean[1].Cap, mean[1].CapLoad, burst[1].Cap)
	}
}

func TestWindow(t *testing.T) {
	for _, tt := range []struct {
		n          int
		warm, tail float64
		from, to   int
	}{{200, 0.1, 0.2, 20, 160}, {10, 0, 0, 0, 10}, {3, 0.5, 0.5, 2, 3}} {
		if from, to := window(tt.n, tt.warm, tt.tail); from != tt.from || to != tt.to {
			t.Errorf("window(%d, %g, %g) = %d, %d; want %d, %d", tt.n, tt.warm, tt.tail, from, to, tt.from, tt.to)
		}
	}
}

func TestDefaultSetups(t *testing.T) {
	// Every strategy once, and the GIE prefix emulation again with three
	// replicas.
	if len(DefaultSetups()) != 5+len(config.Strategies()) || !slices.ContainsFunc(DefaultSetups(), func(s fleet.Setup) bool { return s.Replicas == 3 && s.Strategy == "scored" }) ||
		!slices.ContainsFunc(DefaultSetups(), func(s fleet.Setup) bool { return len(s.Settings) == 2 }) {
		t.Errorf("default setups %v", DefaultSetups())
	}
	for _, s := range DefaultSetups() {
		emulation := slices.Contains([]string{
			"queue_kv_max_score", "prefix_queue_kv_max_score", "prefix_match_or_shortest_queue", "prefix_overlap_min_cost", "prefix_affinity_token_load",
		}, s.Strategy)
		if s.Uncapped() != emulation {
			t.Errorf("%s: uncapped %v", s.Name, s.Uncapped())
		}
	}
}
