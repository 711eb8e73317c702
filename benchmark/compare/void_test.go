package compare

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

func TestOverloadedOnlyWhenNoSetupKeptUp(t *testing.T) {
	o := Options{CapacityTTFT: 500 * time.Millisecond}
	run := func(seed uint64, setup string, s stats.Summary) *report.Run {
		s.Setup, s.Load = setup, 0.8
		if s.OK == 0 && s.Errors == 0 {
			s.OK = 100
		}
		return &report.Run{Seed: seed, Summary: s}
	}
	runs := []*report.Run{
		// Seed 1: a cache-aware setup keeps up where Envoy drowns.
		run(1, "envoy LEAST_REQUEST", stats.Summary{TTFTP50: 9000, LowerBounds: []string{"ttft_p99_ms"}}),
		run(1, "router prefix_overlap_min_cost", stats.Summary{TTFTP50: 300}),
		// Seed 2: nobody keeps up: one cut, one slow, one failing fast.
		run(2, "envoy LEAST_REQUEST", stats.Summary{TTFTP50: 400, LowerBounds: []string{"e2e_p99_ms"}}),
		run(2, "router prefix_overlap_min_cost", stats.Summary{TTFTP50: 800}),
		run(2, "router scored", stats.Summary{TTFTP50: 10, Errors: 100, ErrorRate: 1}),
		// Seed 3: every setup keeps up.
		run(3, "envoy LEAST_REQUEST", stats.Summary{TTFTP50: 200}),
	}
	if got, want := overloaded(runs, o), []string{"80% seed 2"}; !slices.Equal(got, want) {
		t.Errorf("overloaded %v, want %v", got, want)
	}
}

// overloadAll marks every (load, seed) of rep overloaded, as a comparison
// whose every seed no configuration kept up with, and pools again.
func overloadAll(rep *report.Report) {
	rep.Overload = nil
	for _, r := range rep.Runs {
		if k := report.OverloadKey(r.Summary.Load, r.Seed); !slices.Contains(rep.Overload, k) {
			rep.Overload = append(rep.Overload, k)
		}
	}
	var setups []fleet.Setup
	for _, r := range rep.Runs {
		if !slices.ContainsFunc(setups, func(s fleet.Setup) bool { return s.Name == r.Summary.Setup }) {
			setups = append(setups, fleet.Setup{Name: r.Summary.Setup})
		}
	}
	rep.MarkVoid()
	rep.Stats = pooledStats(rep.Runs, rep.Measured, Options{Loads: rep.Loads, Setups: setups, SLO: rep.SLO}, rep.Overload)
	rep.Aims = computeAims(rep, AimsConversation)
}

// compareFiles are the files Write publishes for a comparison
// named name.
func compareFiles(name string) []string {
	var out []string
	for _, f := range []string{"compare.json", "compare.csv", "report.md", "ttft-cdf.png", "e2e-cdf.png", "ttft-p99-vs-load.png", "hit-rate.png", "inflight.png"} {
		base, ext, _ := strings.Cut(f, ".")
		out = append(out, base+"-"+name+"."+ext)
	}
	return out
}

func TestWriteCompareEmptyVoidAndSmall(t *testing.T) {
	oneValue := fakeReport(map[string]float64{report.DefaultSetup: 1}, []float64{0.8}, true)
	for _, r := range oneValue.Runs {
		for i := range r.Results {
			r.Results[i].TTFT, r.Results[i].Latency = 5*time.Millisecond, 5*time.Millisecond
		}
	}
	oneValue.Stats = pooledStats(oneValue.Runs, oneValue.Measured, Options{Loads: oneValue.Loads, Setups: []fleet.Setup{{Name: report.DefaultSetup}}, SLO: oneValue.SLO}, nil)
	allVoid := fakeReport(map[string]float64{report.DefaultSetup: 1, "envoy LEAST_REQUEST": 2}, []float64{0.6, 0.8}, true)
	overloadAll(allVoid)
	busy := fakeReport(map[string]float64{report.DefaultSetup: 1}, []float64{0.8}, false)
	for _, r := range busy.Runs {
		r.Saturated, r.MachineCores = true, 1.95
	}
	busy.MarkVoid()
	noRuns := fakeReport(map[string]float64{report.DefaultSetup: 1}, []float64{0.8}, false)
	noRuns.Runs, noRuns.Stats, noRuns.Aims = nil, nil, nil

	for _, tc := range []struct {
		name string
		rep  *report.Report
		// notes is how many plots say they have no data; voidWant is a
		// word the void error must hold ("" when the comparison is valid).
		notes    int
		voidWant string
		mdWant   []string
	}{
		{"empty", &report.Report{Name: "empty"}, 5, "no run was made", []string{"## Runs", "no valid data"}},
		{"no-runs", noRuns, 5, "no run was made", []string{"No configuration has figures at this load", "Not judged"}},
		{"all-void", allVoid, 4, "all 12 runs void (overload in 12)", []string{"**VOID comparison**", "lower --loads", "No configuration has figures at this load", "**VOID**: overload", "Not judged", "no valid data"}},
		{"machine-busy", busy, 0, "--time-scale", []string{"**VOID comparison**", "machine busy (1.95 of 2 cores)"}},
		{"one-setup-one-load", fakeReport(map[string]float64{report.DefaultSetup: 1}, []float64{0.8}, false), 0, "", []string{"**Valid**", "## 80% of capacity"}},
		{"one-value", oneValue, 0, "", []string{"| " + report.DefaultSetup + " | 5 [5, 5] |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.rep.Name = tc.name
			if err := report.Write(dir, tc.rep); err != nil {
				t.Fatal(err)
			}
			for _, f := range compareFiles(tc.name) {
				if st, err := os.Stat(filepath.Join(dir, "latest", f)); err != nil || st.Size() == 0 {
					t.Errorf("latest/%s: %v", f, err)
				}
			}
			if len(tc.rep.PlotNotes) != tc.notes {
				t.Errorf("plot notes %v, want %d", tc.rep.PlotNotes, tc.notes)
			}
			md, err := os.ReadFile(filepath.Join(dir, "latest", "report-"+tc.name+".md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.mdWant {
				if !bytes.Contains(md, []byte(want)) {
					t.Errorf("report lacks %q", want)
				}
			}
			err = tc.rep.VoidError("r.md")
			switch {
			case tc.voidWant == "" && err != nil:
				t.Errorf("valid comparison: %v", err)
			case tc.voidWant != "" && (!errors.Is(err, report.ErrVoid) || !strings.Contains(err.Error(), tc.voidWant) || !strings.HasSuffix(err.Error(), "report: r.md")):
				t.Errorf("void error %v, want report.ErrVoid naming %q and the report", err, tc.voidWant)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("void error is not one line: %q", err)
			}
		})
	}
}

func TestMachineBudget(t *testing.T) {
	o := Options{Loads: []float64{0.6, 0.8}, Seeds: []uint64{1, 2}, TimeScale: 0.001}
	caps := map[uint64]float64{1: 40, 2: 60}
	b := machineBudget(o, caps, 0)
	if b.WallRate != 0.8*60/0.001 {
		t.Errorf("wall rate %.0f, want the busiest run's, 48000", b.WallRate)
	}
	warn := b.Warning(o.TimeScale)
	if !strings.Contains(warn, "expect void runs") || b.FitScale <= o.TimeScale {
		t.Fatalf("tiny time scale: %q, fit %g", warn, b.FitScale)
	}
	// At the scale it names, the busiest run fits.
	o.TimeScale = b.FitScale * 1.001
	if fit := machineBudget(o, caps, 0); fit.Need > fit.Have || fit.Warning(o.TimeScale) != "" {
		t.Errorf("at the fitting scale %g: %+v", o.TimeScale, fit)
	}
	// A machine busy already has no scale that fits.
	full := machineBudget(o, caps, float64(runtime.NumCPU()))
	if full.FitScale != 0 || !strings.Contains(full.Warning(o.TimeScale), "already busy") {
		t.Errorf("busy machine: %+v %q", full, full.Warning(o.TimeScale))
	}
	var none *report.Budget
	if none.Warning(1) != "" {
		t.Error("no budget warns")
	}
}

func TestDegradedRouting(t *testing.T) {
	gpus := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		s    stats.Summary
		want string
	}{
		{"every GPU served, every request named", stats.Summary{OK: 100, PerWorker: map[string]int{"a": 50, "b": 30, "c": 20}}, ""},
		{"one unnamed in a hundred is within the share", stats.Summary{OK: 100, PerWorker: map[string]int{"a": 50, "b": 30, "c": 19}}, ""},
		{"no request named: failed open", stats.Summary{OK: 100, PerWorker: map[string]int{}}, "100 of 100 successful requests name no worker"},
		{"a GPU left idle", stats.Summary{OK: 100, PerWorker: map[string]int{"a": 60, "b": 40}}, "no request served by c"},
		{"everything on one GPU, some unnamed", stats.Summary{OK: 100, PerWorker: map[string]int{"b": 90}}, "10 of 100 successful requests name no worker; no request served by a, c"},
	} {
		if got := degradedRouting(tc.s, gpus); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
