package latency

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Target names what a prediction was of.
type Target int

// The predicted latencies.
const (
	TTFT Target = iota
	TPOT
)

// DefaultErrorWindow is the predictions an ErrorTracker keeps per target.
const DefaultErrorWindow = 1000

// ErrorTracker keeps the absolute relative errors, |predicted − actual| /
// actual, of the last predictions of each target, for metrics. A fixed
// count rather than a time window keeps it free of clocks and bounds its
// memory; at a router's request rate the last thousand predictions are
// the last seconds to minutes. It is safe for concurrent use.
type ErrorTracker struct {
	mu     sync.Mutex
	window int
	ring   [2][]float64
	next   [2]int
	total  [2]uint64
}

// NewErrorTracker keeps the last window predictions per target
// (DefaultErrorWindow when window ≤ 0).
func NewErrorTracker(window int) *ErrorTracker {
	if window <= 0 {
		window = DefaultErrorWindow
	}
	return &ErrorTracker{window: window}
}

// Record adds one prediction and what was then measured. A measurement
// that is not positive carries no relative error and is ignored, as is an
// unknown target.
func (t *ErrorTracker) Record(target Target, predicted, actual time.Duration) {
	if actual <= 0 || (target != TTFT && target != TPOT) {
		return
	}
	e := math.Abs(float64(predicted)-float64(actual)) / float64(actual)
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.ring[target]
	if len(r) < t.window {
		t.ring[target] = append(r, e)
	} else {
		r[t.next[target]] = e
		t.next[target] = (t.next[target] + 1) % t.window
	}
	t.total[target]++
}

// ErrorSummary is the error of a target's predictions in the window.
type ErrorSummary struct {
	// Median and P90 are absolute relative errors: 0.1 is 10 % off.
	Median, P90 float64
	// Count is the predictions in the window; Total those ever recorded.
	Count int
	Total uint64
}

// Summary is the error of target's predictions in the window; zero with
// Count 0 when there are none.
func (t *ErrorTracker) Summary(target Target) ErrorSummary {
	if target != TTFT && target != TPOT {
		return ErrorSummary{}
	}
	t.mu.Lock()
	s := slices.Clone(t.ring[target])
	total := t.total[target]
	t.mu.Unlock()
	out := ErrorSummary{Count: len(s), Total: total}
	if len(s) == 0 {
		return out
	}
	slices.Sort(s)
	out.Median, out.P90 = Quantile(s, 0.5), Quantile(s, 0.9)
	return out
}

// Quantile is the q-quantile (0..1) of sorted values, interpolating
// between neighbours.
func Quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}
