package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// Two models' series of vLLM's inter-token histogram, the older name
// beside it with other counts: the newer name is read, series summed.
const vllmITL = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 1
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{model_name="a",le="0.05"} 80
vllm:inter_token_latency_seconds_bucket{model_name="a",le="0.1"} 95
vllm:inter_token_latency_seconds_bucket{model_name="a",le="0.15"} 99
vllm:inter_token_latency_seconds_bucket{model_name="a",le="+Inf"} 100
vllm:inter_token_latency_seconds_sum{model_name="a"} 6
vllm:inter_token_latency_seconds_count{model_name="a"} 100
vllm:inter_token_latency_seconds_bucket{model_name="b",le="0.05"} 10
vllm:inter_token_latency_seconds_bucket{model_name="b",le="0.1"} 10
vllm:inter_token_latency_seconds_bucket{model_name="b",le="0.15"} 12
vllm:inter_token_latency_seconds_bucket{model_name="b",le="+Inf"} 20
vllm:inter_token_latency_seconds_sum{model_name="b"} 9
vllm:inter_token_latency_seconds_count{model_name="b"} 20
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{model_name="a",le="0.1"} 1
vllm:time_per_output_token_seconds_bucket{model_name="a",le="+Inf"} 1
vllm:time_per_output_token_seconds_sum{model_name="a"} 0.01
vllm:time_per_output_token_seconds_count{model_name="a"} 1
`

func TestParseITLHistogram(t *testing.T) {
	r, err := ParseMetricsWithGaps(FormatVLLM, []byte(vllmITL))
	if err != nil || r.ITL == nil {
		t.Fatalf("%+v %v", r, err)
	}
	tests := []struct {
		limit float64
		over  float64
		ok    bool
	}{
		{0.1, 120 - 105, true},         // an edge: over 0.1 s
		{0.1 - 1e-17, 120 - 105, true}, // a rounding below it still is
		{0.12, 120 - 105, true},        // between edges: the lower one counts
		{0.15, 120 - 111, true},
		{5, 120 - 111, true},
		{0.01, 0, false}, // below every edge: no answer
	}
	for _, tt := range tests {
		if over, ok := r.ITL.Over(tt.limit); over != tt.over || ok != tt.ok {
			t.Errorf("Over(%g) = %g, %v; want %g, %v", tt.limit, over, ok, tt.over, tt.ok)
		}
	}
	// The older name alone is read too; other formats have none.
	old := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n" +
		"# TYPE vllm:time_per_output_token_seconds histogram\n" +
		"vllm:time_per_output_token_seconds_bucket{le=\"0.1\"} 7\n" +
		"vllm:time_per_output_token_seconds_bucket{le=\"+Inf\"} 9\n" +
		"vllm:time_per_output_token_seconds_count 9\n"
	if r, _ := ParseMetricsWithGaps(FormatVLLM, []byte(old)); r.ITL == nil || r.ITL.Count != 9 {
		t.Errorf("older name: %+v", r.ITL)
	}
	if r, _ := ParseMetricsWithGaps(FormatVLLM, []byte(vllmV1)); r.ITL != nil {
		t.Errorf("no histogram, read %+v", r.ITL)
	}
	// Without the tail signal the histogram is not even parsed.
	if r, _ := ParseMetrics(FormatVLLM, []byte(vllmITL)); r.ITL != nil {
		t.Errorf("ParseMetrics read the inter-token histogram: %+v", r.ITL)
	}
}

func TestGapWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := t0.Add(time.Second)
	open := state.Telemetry{
		GapMark:  state.Sample{Value: 10000, At: t0},
		SlowMark: state.Sample{Value: 40, At: t0},
	}
	tests := []struct {
		name       string
		prev       state.Telemetry
		gaps, slow float64
		wantMark   bool    // a new window opens at (gaps, slow)
		wantShare  float64 // -1: none set
	}{
		{"first reading opens a window", state.Telemetry{}, 500, 3, true, -1},
		{"too few gaps: the window goes on", open, 10000 + gapWindow - 1, 90, false, -1},
		{"a full window closes with its share", open, 10000 + 4000, 50, true, 10.0 / 4000},
		{"no slow gaps", open, 10000 + gapWindow, 40, true, 0},
		{"counts went back: a restart opens a window", open, 300, 1, true, -1},
		{"slow count went back", open, 20000, 39, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tm state.Telemetry
			gapCheck(tt.prev, &tm, tt.gaps, tt.slow, at)
			marked := tm.GapMark == state.Sample{Value: tt.gaps, At: at} && tm.SlowMark == state.Sample{Value: tt.slow, At: at}
			if marked != tt.wantMark || (!tt.wantMark && !tm.GapMark.At.IsZero()) {
				t.Errorf("marks %+v %+v, want new window %v", tm.GapMark, tm.SlowMark, tt.wantMark)
			}
			switch {
			case tt.wantShare < 0 && !tm.SlowShare.At.IsZero():
				t.Errorf("share %+v set", tm.SlowShare)
			case tt.wantShare >= 0 && (tm.SlowShare.Value != tt.wantShare || !tm.SlowShare.At.Equal(at)):
				t.Errorf("share %+v, want %g", tm.SlowShare, tt.wantShare)
			}
		})
	}
}

// shareRecorder stands in for the learner: it records the slow-gap share each
// cycle's snapshot shows for one worker.
type shareRecorder struct{ shares []state.Sample }

func (r *shareRecorder) Learn(_ context.Context, snap state.Snapshot, _ []string) error {
	for _, w := range snap.Workers {
		if w.Spec.ID == "engine" {
			r.shares = append(r.shares, w.Telemetry.SlowShare)
		}
	}
	return nil
}

// A monitor cycle against a real HTTP exposition: the first scrape opens a
// window, a scrape with fewer than gapWindow new gaps leaves it open, and
// one past it closes it with the share of gaps over the SLO (100 ms,
// bucket edge 0.1), which the next cycle's learner sees.
func TestMonitorMeasuresSlowGaps(t *testing.T) {
	ctx := context.Background()
	var total, fast atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"+
			"# TYPE vllm:inter_token_latency_seconds histogram\n"+
			"vllm:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"0.05\"} %d\n"+
			"vllm:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"0.1\"} %d\n"+
			"vllm:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} %d\n"+
			"vllm:inter_token_latency_seconds_count{model_name=\"m\"} %d\n", fast.Load(), fast.Load(), total.Load(), total.Load())
	}))
	defer srv.Close()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(ctx, []state.WorkerSpec{{ID: "engine", Address: srv.Listener.Addr().String(), Models: []string{"m"}, MaxConcurrency: 8}}); err != nil {
		t.Fatal(err)
	}
	rec := &shareRecorder{}
	m := NewMonitor(store, snapshotOf{store}, Options{Replica: "r", ScrapeInterval: time.Second, HealthInterval: time.Hour, Learner: rec, SlowGap: 100 * time.Millisecond})
	total.Store(1000)
	fast.Store(990)
	m.Cycle(ctx) // opens the window at (1000, 10 slow)
	total.Store(1000 + gapWindow - 1)
	fast.Store(990 + gapWindow - 1)
	m.Cycle(ctx) // not enough gaps yet
	total.Store(1000 + 4000)
	fast.Store(990 + 4000 - 6) // 6 of the 4,000 new gaps over 100 ms
	m.Cycle(ctx)
	m.Cycle(ctx) // the learner reads the snapshot taken before the scrape
	if len(rec.shares) != 4 || !rec.shares[2].At.IsZero() || rec.shares[3].Value != 6.0/4000 {
		t.Fatalf("slow-gap shares seen by the learner: %+v", rec.shares)
	}
	snap, _ := store.Snapshot(ctx)
	if tm := snap.Workers[0].Telemetry; tm.GapMark.Value != 5000 || tm.SlowMark.Value != 16 {
		t.Fatalf("the next window opens where this one closed: %+v %+v", tm.GapMark, tm.SlowMark)
	}
}
