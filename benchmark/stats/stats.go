// Package stats turns measured requests into the benchmark's figures:
// percentiles, a run's summary against an SLO (goodput), and the pooled
// figures of several seeds with 95 % intervals from a two-level block
// bootstrap (Estimate says how, Bootstrap does it, blockLength picks the
// blocks), and the verdict of an interval against a target (AtMost,
// AtLeast). It reads results only: no processes, no clocks.
package stats

import (
	"math"
	"slices"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// Percentile returns the p-th percentile (0..100) of ds by nearest rank; 0
// for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[nearestRank(len(s), p)-1]
}

// nearestRank is the 1-based rank of the p-th percentile of n values:
// ceil(p/100·n), within [1, n].
func nearestRank(n int, p float64) int {
	return min(max(int(math.Ceil(p/100*float64(n))), 1), n)
}

// MeanCV returns the mean and coefficient of variation (stddev/mean) of xs.
func MeanCV(xs []float64) (mean, cv float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if mean == 0 {
		return 0, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs))) / mean
}

// Latencies returns the end-to-end latencies of the successful results.
func Latencies(rs []loadgen.Result) []time.Duration {
	out := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		if r.OK() {
			out = append(out, r.Latency)
		}
	}
	return out
}

// Ms is d in milliseconds, to the microsecond: the unit of every figure.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MsDuration is v milliseconds as a Duration.
func MsDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// Spread is a figure over the rounds of a run: its median and the range of
// the rounds. With n rounds, the population median lies outside
// [Min, Max] with probability 2^(1-n) (6 % for 5 rounds), so the range is
// the interval a verdict is judged on.
type Spread struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"`
}

// SpreadOf is the Spread of xs, kept as the rounds.
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1], Rounds: xs}
}
