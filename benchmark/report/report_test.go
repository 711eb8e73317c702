package report

import (
	"bytes"
	"encoding/csv"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
)

func TestRequestsCSVTracesEachGoodputMiss(t *testing.T) {
	gaps := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, v := range ms {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	rep := &Report{SLO: stats.DefaultSLO(), Measured: [2]int{0, 3}, Runs: []*Run{{
		Summary: stats.Summary{Setup: "router scored", Load: 0.8}, Seed: 2,
		Results: []loadgen.Result{
			{Status: 200, TTFT: 100 * time.Millisecond, Latency: time.Second, Tokens: 3, Node: "a40-0", ITLs: gaps(20, 150)},
			{Status: 200, TTFT: 100 * time.Millisecond, Latency: time.Second, Tokens: 3, Node: "h100-0", ITLs: gaps(20, 30)},
			{Status: 200, TTFT: 100 * time.Millisecond, Latency: time.Second, Tokens: 1, Node: "h100-1"},
		},
	}}}
	var b bytes.Buffer
	if err := requestsCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := [][]string{}
	for _, r := range rows {
		got = append(got, []string{r[10], r[13], r[14]})
	}
	want := [][]string{{"worker", "itl_p99_ms", "good"}, {"a40-0", "150.0", "false"}, {"h100-0", "30.0", "true"}, {"h100-1", "", "true"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worker, itl_p99_ms, good: %v, want %v", got, want)
	}
}

func TestHostCellListsAttempts(t *testing.T) {
	if cell := hostCell(&Run{HostSlowdown: 1.3, HostAttempts: []float64{1.4, 1.3}}); !strings.Contains(cell, "attempts 1.40, 1.30") {
		t.Errorf("cell %q does not list the attempts", cell)
	}
	if cell := hostCell(&Run{HostSlowdown: 1.1}); strings.Contains(cell, "attempts") {
		t.Errorf("cell %q lists attempts of a run made once", cell)
	}
}
