package benchmark

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRuns builds runs of setups at loads with made-up results: each
// setup's latencies scaled by its factor.
func fakeRuns(factors map[string]float64, loads []float64) []*Run {
	var runs []*Run
	for _, load := range loads {
		for name, f := range factors {
			var rs []Result
			for i := 0; i < 50; i++ {
				d := time.Duration(f*float64(10+i)) * time.Millisecond
				rs = append(rs, Result{
					Start: time.Duration(i) * 100 * time.Millisecond, TTFT: d, Latency: 20 * d, Status: 200, Tokens: 11,
					Node: "gpu-0", ITLs: []time.Duration{d / 10, d / 5},
				})
			}
			s := Summarize(rs, DefaultSLO())
			s.Setup, s.Load, s.Rate = name, load, 10*load
			runs = append(runs, &Run{
				Summary: s, results: rs, MachineCPUs: 2,
				CPU:      []CPUUse{{Name: "envoy", Cores: 0.1}},
				Inflight: []InflightSample{{T: 0, Running: []int{1, 2}}, {T: 1, Running: []int{3, -1}}},
			})
		}
	}
	return runs
}

func TestComputeAims(t *testing.T) {
	runs := fakeRuns(map[string]float64{
		"router scored": 1, "envoy LEAST_REQUEST": 2, "router queue_kv_max_score": 4, "router round_robin": 1,
	}, []float64{0.6, 0.8})
	aims := computeAims(runs, 0.8)
	if len(aims) != 4 {
		t.Fatalf("aims %+v", aims)
	}
	if a := aims[0]; a.Load != 0.8 || a.Ratio < 0.45 || a.Ratio > 0.55 || !a.Met {
		t.Errorf("vs LEAST_REQUEST: %+v", a)
	}
	if a := aims[1]; a.Ratio < 0.2 || a.Ratio > 0.3 || !a.Met {
		t.Errorf("vs queue_kv_max_score: %+v", a)
	}
	// Same relative spread: equal CVs, ratio 1, not met.
	if a := aims[2]; a.Ratio < 0.99 || a.Ratio > 1.01 || a.Met {
		t.Errorf("CV: %+v", a)
	}
	if a := aims[3]; a.Ratio != 1 || !a.Met {
		t.Errorf("throughput: %+v", a)
	}
	// 0.8 of the emulated default scheduler's p99 misses the 0.7 target.
	close := computeAims(fakeRuns(map[string]float64{"router scored": 1, "router queue_kv_max_score": 1.25}, []float64{0.8}), 0.8)
	if len(close) < 1 || close[0].Ratio < 0.79 || close[0].Ratio > 0.81 || close[0].Met {
		t.Errorf("0.8 of queue_kv_max_score: %+v", close)
	}
	if computeAims(fakeRuns(map[string]float64{"envoy LEAST_REQUEST": 1}, []float64{0.8}), 0.8) != nil {
		t.Error("aims without scored")
	}
}

func TestWriteCompare(t *testing.T) {
	dir := t.TempDir()
	runs := fakeRuns(map[string]float64{"router scored": 1, "envoy LEAST_REQUEST": 2}, []float64{0.6, 0.8, 0.95})
	runs[0].Saturated = true
	rep := &CompareReport{
		Command: "llm-bench compare --test", Machine: "test machine", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Fleet:     []GPU{{ID: "g0", Profile: "h100-llama2-7b", Cap: 4}, {ID: "g1", Profile: "a40-llama2-7b", Cap: 2}},
		TimeScale: 1, SLO: DefaultSLO(), Requests: 50, Measured: [2]int{0, 50}, Loads: []float64{0.6, 0.8, 0.95}, Runs: runs,
		Capacity: Capacity{Setup: "envoy LEAST_REQUEST", Rate: 10, Probes: []Probe{{Rate: 10, TTFTP50: 100, Sustainable: true}}},
		Void:     []string{"60% router scored"},
	}
	rep.Aims = computeAims(runs, 0.8)
	if err := writeCompare(dir, rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "compare.json", "compare.csv", plotTTFTCDF, plotE2ECDF, plotP99Load, plotInflight} {
		st, err := os.Stat(filepath.Join(dir, "latest", f))
		if err != nil || st.Size() == 0 {
			t.Errorf("latest/%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "latest", "report.md"))
	for _, want := range []string{"llm-bench compare --test", "test machine", "**VOID**", "## 80% of capacity", "| router scored |", "## CPU", "## Aims", "ttft-cdf.png"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "latest", "compare.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 7 {
		t.Errorf("compare.csv has %d lines, want header + 6", lines)
	}
}

func TestHerdReport(t *testing.T) {
	yes := true
	rep := &HerdReport{Command: "llm-bench herd", Workers: 4, Results: []HerdResult{
		{Setup: "router scored", Replicas: 3, AtomicClaim: &yes, Bursts: 10, Collisions: 0},
		{Setup: "envoy LEAST_REQUEST", Bursts: 10, Collisions: 9, CollisionRate: 0.9},
	}}
	var b bytes.Buffer
	rep.Markdown(&b)
	if !strings.Contains(b.String(), "| router scored | 3 | true | 10 | 0 | 0% |") || !strings.Contains(b.String(), "| envoy LEAST_REQUEST | - | - | 10 | 9 | 90% |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}
