package latency

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestErrorTracker(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name        string
		window      int
		records     [][2]time.Duration // predicted, actual
		median, p90 float64
		count       int
		total       uint64
	}{
		{name: "empty", window: 10},
		{
			name: "exact and off", window: 10,
			records: [][2]time.Duration{{100 * ms, 100 * ms}, {150 * ms, 100 * ms}, {50 * ms, 100 * ms}},
			median:  0.5, p90: 0.5, count: 3, total: 3,
		},
		{
			name: "window keeps the last", window: 2,
			records: [][2]time.Duration{{300 * ms, 100 * ms}, {110 * ms, 100 * ms}, {120 * ms, 100 * ms}},
			median:  0.15, p90: 0.19, count: 2, total: 3,
		},
		{
			name: "ignores unmeasured", window: 10,
			records: [][2]time.Duration{{100 * ms, 0}, {100 * ms, -ms}, {-100 * ms, 100 * ms}},
			median:  2, p90: 2, count: 1, total: 1,
		},
		{name: "default window", window: 0, records: [][2]time.Duration{{200 * ms, 100 * ms}}, median: 1, p90: 1, count: 1, total: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewErrorTracker(tc.window)
			for _, r := range tc.records {
				tr.Record(TTFT, r[0], r[1])
			}
			got := tr.Summary(TTFT)
			if math.Abs(got.Median-tc.median) > 1e-9 || math.Abs(got.P90-tc.p90) > 1e-9 || got.Count != tc.count || got.Total != tc.total {
				t.Fatalf("summary %+v, want median %v p90 %v count %d total %d", got, tc.median, tc.p90, tc.count, tc.total)
			}
			if other := tr.Summary(TPOT); other.Count != 0 {
				t.Fatalf("TPOT shows %d TTFT records", other.Count)
			}
		})
	}
	tr := NewErrorTracker(0)
	tr.Record(Target(7), ms, ms)
	if s := tr.Summary(Target(7)); s.Count != 0 {
		t.Fatalf("unknown target recorded: %+v", s)
	}
}

// The p90 is of the spread of errors in the window, and concurrent
// recorders lose nothing.
func TestErrorTrackerConcurrent(t *testing.T) {
	tr := NewErrorTracker(1000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 250 {
				// errors 0, 0.001, ..., 0.999 across the goroutines
				e := float64(g*250+i) / 1000
				tr.Record(TPOT, time.Duration(float64(time.Second)*(1+e)), time.Second)
			}
		})
	}
	wg.Wait()
	s := tr.Summary(TPOT)
	if s.Count != 1000 || math.Abs(s.Median-0.4995) > 1e-6 || math.Abs(s.P90-0.8991) > 1e-6 {
		t.Fatalf("summary %+v, want 1000 errors with median 0.4995 and p90 0.8991", s)
	}
}
