package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// smallCompare is a compare result by hand: two H100s and an A40 with
// their caps, half-size KV, a trace of 30 rows, 24 requests a run (the
// middle 20 measured) at time scale 0.5, two seeds, and a setup of every
// kind the mapping handles.
func smallCompare(t *testing.T) *report.Report {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace.csv")
	var b strings.Builder
	b.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
	for i := range 30 {
		fmt.Fprintf(&b, "%d.0,%d,%d\n", i, 200+37*i, 5+3*i)
	}
	if err := os.WriteFile(trace, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	eng := Engine{MaxNumSeqs: 256, MaxBatchedTokens: 2048, GPUMemUtil: 0.5}
	gpus := []fleet.GPU{
		{ID: "h100-0", Profile: "h100-llama2-7b", Cap: 82},
		{ID: "h100-1", Profile: "h100-llama2-7b", Cap: 82},
		{ID: "a40-0", Profile: "a40-llama2-7b", Cap: 7},
	}
	_, specs, err := fleetSpecs(gpuClasses(gpus, fleet.Setup{}, false), eng, Disagg{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range gpus {
		gpus[i].KVBlocks, gpus[i].PrefillRate = specs[i].KVBlocks, specs[i].PrefillTokensPerSecond
	}
	rep := &report.Report{
		Name: "small", Trace: trace, Workload: "trace lengths, poisson arrivals, max_tokens absent or 4096 (half each)",
		Fleet: gpus, FleetKeys: map[string]any{"stream_summary": true, "gpu_mem_util": 0.5, "max_num_seqs": 256.0, "max_batched_tokens": 2048.0},
		TimeScale: 0.5, SLO: stats.DefaultSLO(), Requests: 24, Measured: [2]int{2, 22}, Seeds: []uint64{1, 2}, Loads: []float64{0.8},
	}
	names := []string{
		"envoy ROUND_ROBIN", "envoy LEAST_REQUEST", "envoy RANDOM", "router scored x3",
		"router " + emulate.PrefixQueueKVMaxScore, "router scored scoring.weights.prefix=0",
	}
	for _, n := range names {
		rep.Stats = append(rep.Stats, stats.Stats{Setup: n, Load: 0.8, Seeds: []uint64{1, 2}})
		for _, seed := range rep.Seeds {
			rep.Runs = append(rep.Runs, &report.Run{Seed: seed, Summary: stats.Summary{Setup: n, Load: 0.8, Rate: 3 * float64(seed)}})
		}
	}
	return rep
}

// The mapping from a compare result to simulator runs, by hand: caps for
// the router's strategies, none for Envoy and the emulations; the
// benchmark's periods in wall time back to GPU time; replicas; setups the
// simulator cannot run are named with why.
func TestPlanValidationMapsCompareToSim(t *testing.T) {
	rep := smallCompare(t)
	p, err := planValidation(rep)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Engine{MaxNumSeqs: 256, MaxBatchedTokens: 2048, GPUMemUtil: 0.5, StreamSummary: true}); p.Engine != want {
		t.Errorf("engine = %+v, want %+v", p.Engine, want)
	}
	wantWorkload := loadgen.WorkloadOptions{TracePath: rep.Trace, Kind: loadgen.KindTrace, Arrivals: loadgen.ArrivalsPoisson, MaxTokens: loadgen.MaxTokensBound}
	if p.Workload != wantWorkload {
		t.Errorf("workload = %+v, want %+v", p.Workload, wantWorkload)
	}
	capped := []GPUClass{{Profile: "h100-llama2-7b", Count: 2, MaxConcurrency: 82}, {Profile: "a40-llama2-7b", Count: 1, MaxConcurrency: 7}}
	uncapped := []GPUClass{{Profile: "h100-llama2-7b", Count: 2}, {Profile: "a40-llama2-7b", Count: 1}}
	def := config.Default()
	// Periods: the benchmark multiplies GPU time by 0.5 (floored at the
	// router's 10 ms scrape); the simulator divides by 0.5 again.
	product := Router{RefreshInterval: def.RefreshInterval.D(), ScrapePeriod: def.Telemetry.ScrapeInterval.D(), TelemetryStale: def.Telemetry.StaleAfter.D()}
	gie := product
	gie.ScrapePeriod = 50 * time.Millisecond
	want := []struct {
		strategy string
		gpus     []GPUClass
		replicas int
		router   Router
		skip     string
	}{
		{"round_robin", uncapped, 1, product, ""},
		{emulate.LeastRequestP2C, uncapped, 1, product, ""},
		{"", nil, 0, Router{}, "no stand-in for Envoy's RANDOM"},
		{"scored", capped, 3, product, ""},
		{emulate.PrefixQueueKVMaxScore, uncapped, 1, gie, ""},
		{"scored", capped, 1, product, ""},
	}
	if len(p.Setups) != len(want) {
		t.Fatalf("%d setups planned, want %d", len(p.Setups), len(want))
	}
	for i, w := range want {
		got := p.Setups[i]
		if w.skip != "" {
			if !strings.Contains(got.Skip, w.skip) {
				t.Errorf("%s: skip = %q, want it to say %q", got.Real.Setup, got.Skip, w.skip)
			}
			continue
		}
		if got.Skip != "" {
			t.Errorf("%s: skipped: %s", got.Real.Setup, got.Skip)
			continue
		}
		r := got.Run
		// compare's queue, in GPU time (its timeouts are wall time).
		if r.Config == nil || r.Config.Queue.MaxQueueSize != 100000 || r.Config.Queue.Timeout.Standard.D() != 20*time.Minute {
			t.Errorf("%s: router config %+v, want compare's queue (100,000, 10 min of wall time = 20 of GPU time)", got.Real.Setup, r.Config)
		}
		if strings.Contains(got.Real.Setup, "prefix=0") && r.Config.Scoring.Weights.Prefix != 0 {
			t.Errorf("%s: prefix weight %g, want the setting applied", got.Real.Setup, r.Config.Scoring.Weights.Prefix)
		}
		if r.Strategy != w.strategy || r.Replicas != w.replicas || !reflect.DeepEqual(r.GPUs, w.gpus) || r.Router != w.router {
			t.Errorf("%s: run %+v, want strategy %s, %d replicas, GPUs %+v, router %+v", got.Real.Setup, r, w.strategy, w.replicas, w.gpus, w.router)
		}
	}
}

func TestPlanValidationRefusesWhatItCannotReproduce(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*report.Report)
	}{
		{"fleet_keys.max_model_len", func(r *report.Report) { r.FleetKeys["max_model_len"] = 4096.0 }},
		{"workload", func(r *report.Report) {
			r.Workload = "extreme mix (10 and 2000 output tokens, 25% long), poisson arrivals"
		}},
		{"measured_window", func(r *report.Report) { r.Measured = [2]int{2, 30} }},
		{"time_scale", func(r *report.Report) { r.TimeScale = 0 }},
	} {
		rep := smallCompare(t)
		tc.edit(rep)
		if _, err := planValidation(rep); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming the field", tc.field, err)
		}
	}
	rep := smallCompare(t)
	rep.Trace += ".missing"
	if _, err := Validate(rep, "small.json", nil); err == nil || !strings.Contains(err.Error(), "was not read") {
		t.Errorf("a missing trace: error %v, want one saying it was not read", err)
	}
	rep = smallCompare(t)
	rep.Fleet[2].KVBlocks++
	if _, err := Validate(rep, "small.json", nil); err == nil || !strings.Contains(err.Error(), "fleet[2] (a40-0): kv_blocks") {
		t.Errorf("a KV cache unlike the engine's: error %v, want one naming fleet[2]'s kv_blocks", err)
	}
}

// The simulator's requests are the compare harness's jobs, seed by seed,
// at the rate each real run offered.
func TestValidateRunsTheComparesJobs(t *testing.T) {
	rep := smallCompare(t)
	v, err := Validate(rep, "small.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := loadgen.LoadWorkload(loadgen.WorkloadOptions{TracePath: rep.Trace})
	if err != nil {
		t.Fatal(err)
	}
	jobs := w.Jobs(rep.Requests, 6, 2) // seed 2 offered 3 × 2 req/s
	reqs := jobRequests(jobs, w.BlockTokens())
	for i, j := range jobs {
		q := reqs[i]
		if q.Arrival != j.At || q.Prompt != j.Prompt || q.Output != j.Output || q.MaxTokens != j.MaxTokens {
			t.Fatalf("request %d = %+v, job %+v", i, q, j)
		}
	}
	if reqs[0].Blocks[0] == reqs[1].Blocks[0] {
		t.Error("two rows of a trace without prefix ids share their first block")
	}
	verdicts := map[string]string{}
	for _, c := range v.Setups {
		verdicts[c.Setup] = c.Verdict
		if c.Verdict == VerdictAgrees || c.Verdict == VerdictDiffers {
			if len(c.Metrics) != len(validationMetrics) {
				t.Errorf("%s: %d figures, want %d", c.Setup, len(c.Metrics), len(validationMetrics))
			}
			n := 0
			for _, s := range c.Served {
				n += s.Sim
			}
			if want := 2 * (rep.Measured[1] - rep.Measured[0]); n != want {
				t.Errorf("%s: the simulator served %d measured requests, want %d", c.Setup, n, want)
			}
		}
	}
	if verdicts["envoy RANDOM"] != VerdictNotRun || verdicts["router scored scoring.weights.prefix=0"] == VerdictNotRun {
		t.Errorf("verdicts %v: envoy RANDOM must be named not run, a setup with settings run", verdicts)
	}
	var md bytes.Buffer
	v.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| envoy ROUND_ROBIN | 80 % | round_robin, uncapped |") {
		t.Errorf("markdown lacks the round robin row:\n%s", md.String())
	}
}

// judge reads its verdict off the figures: runs judged against their own
// pooled statistics agree; against an interval moved past them they
// differ on exactly the figures moved; refused requests are counted.
func TestJudgeComputesVerdicts(t *testing.T) {
	runs := make([]*RunResult, 2)
	for s := range runs {
		rng := rand.New(rand.NewPCG(uint64(s), 1))
		r := &RunResult{PrefixQueries: 100, PrefixHits: uint64(10 + 10*s)}
		for i := range 50 {
			at := time.Duration(i) * 100 * time.Millisecond
			ttft := time.Duration(50+rng.IntN(400)) * time.Millisecond
			r.Requests = append(r.Requests, Result{Arrival: at, FirstToken: at + ttft, Done: at + ttft + 20*30*time.Millisecond, Tokens: 21, Outcome: OutcomeOK})
		}
		runs[s] = r
	}
	measured, slo := [2]int{5, 45}, stats.DefaultSLO()
	own, _, _ := poolSim(runs, measured, slo)
	if math.Abs(own.HitRate.Value-0.15) > 1e-12 || own.HitRate.Lo != 0.1 || own.HitRate.Hi != 0.2 {
		t.Fatalf("hit rate %+v, want mean 0.15 in [0.1, 0.2]", own.HitRate)
	}
	c := judge(SetupCheck{Setup: "x"}, own, runs, measured, slo)
	if c.Verdict != VerdictAgrees {
		t.Errorf("against its own figures: %s (%s), want %s", c.Verdict, c.Why, VerdictAgrees)
	}
	for _, m := range c.Metrics {
		if m.Real.Value != 0 && m.Ratio != 1 {
			t.Errorf("%s: ratio %g against itself", m.Metric, m.Ratio)
		}
	}
	moved := own
	p90 := moved.TTFT[1]
	moved.TTFT[1] = stats.Estimate{Value: 2 * p90.Hi, Lo: 1.5 * p90.Hi, Hi: 3 * p90.Hi}
	c = judge(SetupCheck{Setup: "x"}, moved, runs, measured, slo)
	if c.Verdict != VerdictDiffers || c.Why != "outside: ttft_p90_ms" {
		t.Errorf("p90 interval moved: %s (%s), want differs on ttft_p90_ms alone", c.Verdict, c.Why)
	}
	if m := c.Metrics[1]; m.Inside || m.Ratio != p90.Value/(2*p90.Hi) {
		t.Errorf("moved p90: %+v, want outside with ratio %g", m, p90.Value/(2*p90.Hi))
	}
	// Goodput bounds each request's own p99 gap: a quarter of the
	// measured requests over 100 ms is a good fraction of 3/4, whatever
	// their mean time per token (30 ms).
	for _, r := range runs {
		for k := measured[0]; k < measured[1]; k += 4 {
			r.Requests[k].ITLP99 = 150 * time.Millisecond
		}
	}
	if st, _, _ := poolSim(runs, measured, slo); st.Good.Value != 0.75 {
		t.Errorf("good fraction %g with a quarter of the requests' p99 gap over the bound, want 0.75", st.Good.Value)
	}
	runs[1].Requests[7].Outcome = OutcomeRefused
	if c = judge(SetupCheck{Setup: "x"}, own, runs, measured, slo); c.Refused != 1 || len(c.Metrics) != len(validationMetrics) || !strings.Contains(c.Why, "1 requests refused") {
		t.Errorf("with a refused request: refused %d, %d figures, why %q; want 1 counted and every figure judged", c.Refused, len(c.Metrics), c.Why)
	}
}

func TestCheckMetric(t *testing.T) {
	real := stats.Estimate{Value: 100, Lo: 80, Hi: 120}
	for _, tc := range []struct {
		sim             stats.Estimate
		inside, overlap bool
		ratio           float64
	}{
		{stats.Estimate{Value: 80, Lo: 70, Hi: 90}, true, true, 0.8},
		{stats.Estimate{Value: 130, Lo: 115, Hi: 150}, false, true, 1.3},
		{stats.Estimate{Value: 50, Lo: 40, Hi: 60}, false, false, 0.5},
	} {
		m := checkMetric("ttft_p50_ms", real, tc.sim)
		if m.Inside != tc.inside || m.Overlap != tc.overlap || m.Ratio != tc.ratio {
			t.Errorf("sim %+v: inside %v overlap %v ratio %g, want %v %v %g", tc.sim, m.Inside, m.Overlap, m.Ratio, tc.inside, tc.overlap, tc.ratio)
		}
	}
	if m := checkMetric("prefix_hit_rate", stats.Estimate{}, stats.Estimate{}); !m.Inside || m.Ratio != 0 {
		t.Errorf("0 against 0: %+v, want inside with no ratio", m)
	}
}
