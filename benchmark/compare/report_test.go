package compare

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// fakeRuns builds runs of setups at loads with made-up results: each
// setup's latencies scaled by its factor.
func fakeRuns(factors map[string]float64, loads []float64) []*report.Run {
	var runs []*report.Run
	for _, load := range loads {
		for name, f := range factors {
			var rs []loadgen.Result
			for i := 0; i < 50; i++ {
				d := time.Duration(f*float64(10+i)) * time.Millisecond
				rs = append(rs, loadgen.Result{
					Start: time.Duration(i) * 100 * time.Millisecond, TTFT: d, Latency: 20 * d, Status: 200, Tokens: 11,
					Node: "gpu-0", ITLs: []time.Duration{d / 10, d / 5},
				})
			}
			s := stats.Summarize(rs, stats.DefaultSLO())
			s.Setup, s.Load, s.Rate = name, load, 10*load
			runs = append(runs, &report.Run{
				Summary: s, Results: rs, MachineCPUs: 2,
				CPU:      []host.CPUUse{{Name: "envoy", Cores: 0.1}},
				Inflight: []fleet.InflightSample{{T: 0, Running: []int{1, 2}}, {T: 1, Running: []int{3, -1}}},
			})
		}
	}
	return runs
}

// fakeReport pools fakeRuns (three seeds each) into a report.
func fakeReport(factors map[string]float64, loads []float64, prefixed bool) *report.Report {
	var runs []*report.Run
	var setups []fleet.Setup
	for name := range factors {
		setups = append(setups, fleet.Setup{Name: name})
	}
	for _, seed := range []uint64{1, 2, 3} {
		for _, r := range fakeRuns(factors, loads) {
			r.Seed, r.HitRate = seed, 0.2*factors[r.Summary.Setup]
			runs = append(runs, r)
		}
	}
	o := Options{Loads: loads, Setups: setups, SLO: stats.DefaultSLO(), Seeds: []uint64{1, 2, 3}}
	rep := &report.Report{
		Name: "test", Command: "llm-bench compare --test", Machine: "test machine", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Fleet:     []fleet.GPU{{ID: "g0", Profile: "h100-llama2-7b", Cap: 4}, {ID: "g1", Profile: "a40-llama2-7b", Cap: 2}},
		TimeScale: 1, SLO: stats.DefaultSLO(), Requests: 50, Measured: [2]int{0, 50}, Loads: loads, Runs: runs, Seeds: o.Seeds,
		Capacity:     report.Capacity{Setup: "envoy LEAST_REQUEST", Rate: 10, Probes: []report.Probe{{Rate: 10, TTFTP50: 100, Sustainable: true}}},
		SeedCapacity: map[uint64]float64{1: 10, 2: 11, 3: 9},
	}
	if prefixed {
		rep.Ceilings = &report.Ceilings{Trace: 0.366, Unbounded: map[uint64]float64{1: 0.3, 2: 0.3, 3: 0.3}, Fleet: map[uint64]float64{1: 0.25, 2: 0.25, 3: 0.25}, Pooled: map[uint64]float64{1: 0.2, 2: 0.2, 3: 0.2}}
	}
	rep.Stats = pooledStats(runs, rep.Measured, o, nil)
	set := AimsConversation
	if prefixed {
		set = AimsReuse
	}
	rep.Aims = computeAims(rep, set)
	return rep
}

func aimNamed(aims []report.Aim, prefix string) (report.Aim, bool) {
	for _, a := range aims {
		if strings.HasPrefix(a.Name, prefix) {
			return a, true
		}
	}
	return report.Aim{}, false
}

func TestWriteCompare(t *testing.T) {
	dir := t.TempDir()
	rep := fakeReport(map[string]float64{report.DefaultSetup: 1, "envoy LEAST_REQUEST": 2}, []float64{0.6, 0.8, 0.95}, true)
	rep.Runs[0].Saturated = true
	rep.Void = []string{"60% seed 1 router scored"}
	rep.Degraded = []string{"80% seed 2 router queue_kv_max_score (no request served by a40-1)"}
	rep.HostRef = 130
	rep.Runs[1].HostSlowdown, rep.Runs[1].HostAttempts = 1.3, []float64{1.4, 1.3, 1.5}
	if err := report.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report-test.md", "compare-test.json", "compare-test.csv", "ttft-cdf-test.png", "e2e-cdf-test.png", "ttft-p99-vs-load-test.png", "hit-rate-test.png", "inflight-test.png"} {
		st, err := os.Stat(filepath.Join(dir, "latest", f))
		if err != nil || st.Size() == 0 {
			t.Errorf("latest/%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "latest", "report-test.md"))
	for _, want := range []string{"llm-bench compare --test", "test machine", "**VOID**", "**Degraded routing** in 1 run(s)", "no request served by a40-1", "## 80% of capacity", "| " + report.DefaultSetup + " |", "## CPU", "## Aims", "ttft-cdf-test.png", "Prefix-cache ceilings", "36.6%", "**Host speed**", "**Host slow**", "requests held there", "1.30 (attempts 1.40, 1.30, 1.50)"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "latest", "compare-test.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 1+2*3*3 {
		t.Errorf("compare.csv has %d lines, want header + 18", lines)
	}
}
