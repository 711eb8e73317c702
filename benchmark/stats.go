package benchmark

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
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
func Latencies(rs []Result) []time.Duration {
	out := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		if r.OK() {
			out = append(out, r.Latency)
		}
	}
	return out
}

// RunClosed sends n requests from conc workers, each sending its next
// request when the previous one finishes (closed loop).
func RunClosed(ctx context.Context, c *Client, n, conc int, gen func(i int) Request) []Result {
	results := make([]Result, n)
	next := make(chan int)
	var wg sync.WaitGroup
	epoch := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = c.Do(ctx, gen(i), epoch)
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}
