package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
)

func TestRunVoidReasons(t *testing.T) {
	valid := &Run{Seed: 1, Summary: stats.Summary{Load: 0.8}, MachineCPUs: 2, MachineCores: 1, SenderLagMs: 30, HostSlowdown: 1.05}
	if why := valid.VoidReasons(nil); len(why) != 0 {
		t.Errorf("valid run void: %v", why)
	}
	bad := &Run{Seed: 1, Summary: stats.Summary{Load: 0.8}, Saturated: true, MachineCPUs: 2, MachineCores: 1.9, SenderLagMs: 250, HostSlowdown: 1.4}
	why := strings.Join(bad.VoidReasons([]string{"80% seed 1"}), "; ")
	for _, want := range []string{"machine busy (1.90 of 2 cores)", "host slow (1.40x)", "sender late (250 ms)", "overload"} {
		if !strings.Contains(why, want) {
			t.Errorf("reasons %q lack %q", why, want)
		}
	}
}

func TestPlotsWithoutData(t *testing.T) {
	dir := t.TempDir()
	failed := &Run{Summary: stats.Summary{Setup: "s"}, Results: []loadgen.Result{{Status: 503}, {Err: "cut", Cut: true}}}
	one := &Run{Summary: stats.Summary{Setup: "s", Load: 0.8}, Results: []loadgen.Result{{Status: 200, TTFT: time.Millisecond, Latency: time.Millisecond}}}
	ttft := func(r loadgen.Result) (time.Duration, bool) { return r.TTFT, r.OK() }
	for _, tc := range []struct {
		name     string
		draw     func(path string) (string, error)
		wantNote bool
	}{
		{"cdf-none", func(p string) (string, error) { return cdfPlot(p, "t", "x", nil, [2]int{0, 0}, ttft) }, true},
		{"cdf-failed", func(p string) (string, error) { return cdfPlot(p, "t", "x", []*Run{failed}, [2]int{0, 2}, ttft) }, true},
		{"cdf-one-point", func(p string) (string, error) { return cdfPlot(p, "t", "x", []*Run{one}, [2]int{0, 1}, ttft) }, false},
		{"cdf-window-past-results", func(p string) (string, error) { return cdfPlot(p, "t", "x", []*Run{one}, [2]int{5, 9}, ttft) }, false},
		{"load-empty", func(p string) (string, error) { return loadPlot(p, &Report{}) }, true},
		{"load-one-point", func(p string) (string, error) {
			return loadPlot(p, &Report{Runs: []*Run{one}, Stats: []stats.Stats{{Setup: "s", Load: 0.8, Seeds: []uint64{1}, TTFT: [3]stats.Estimate{{}, {}, {Value: 40}}}}})
		}, false},
		{"load-zero", func(p string) (string, error) {
			return loadPlot(p, &Report{Stats: []stats.Stats{{Setup: "s", Load: 0.8, Seeds: []uint64{1}}}})
		}, false},
		{"hit-empty", func(p string) (string, error) { return hitPlot(p, &Report{}, 0.8) }, true},
		{"hit-zero", func(p string) (string, error) {
			return hitPlot(p, &Report{Stats: []stats.Stats{{Setup: "s", Load: 0.8, Seeds: []uint64{1}}}}, 0.8)
		}, false},
		{"inflight-none", func(p string) (string, error) { return inflightPlot(p, nil, nil) }, true},
		{"inflight-no-samples", func(p string) (string, error) { return inflightPlot(p, []fleet.GPU{{ID: "g"}}, []*Run{failed}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".png")
			note, err := tc.draw(path)
			if err != nil {
				t.Fatal(err)
			}
			if (note != "") != tc.wantNote {
				t.Errorf("note %q, want one: %v", note, tc.wantNote)
			}
			if st, err := os.Stat(path); err != nil || st.Size() == 0 {
				t.Errorf("no plot written: %v", err)
			}
		})
	}
}

func TestMarkdownOfEmptyReport(t *testing.T) {
	var b bytes.Buffer
	WriteMarkdown(&b, &Report{})
	WriteMarkdown(&b, &Report{Capacity: Capacity{Setup: "given (--capacity)", Probes: []Probe{{Rate: 1}}}})
	if !strings.Contains(b.String(), "## Runs") {
		t.Errorf("markdown:\n%s", b.String())
	}
}
