package picks

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-router/llm-router/benchmark/stats"
)

// loopStep is one decision of a closed loop: k counts the loop's own
// steps from 0; it returns the latency to record and whether the step
// counts as a pick (false: an error, no latency recorded).
type loopStep func(k int) (latency time.Duration, ok bool)

// loopResult is what a closed loop measured.
type loopResult struct {
	picks, errs int64
	lat         []time.Duration
	elapsed     time.Duration
}

// closedLoop runs every step function in its own goroutine, back to back,
// for d, and gathers the picks, errors and latencies: the driver shared by
// the scheduler's picks run and the bare claim+release floor.
func closedLoop(ctx context.Context, d time.Duration, steps []loopStep) loopResult {
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var picks, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for _, step := range steps {
		wg.Go(func() {
			local := make([]time.Duration, 0, 4096)
			for k := 0; runCtx.Err() == nil; k++ {
				l, ok := step(k)
				if !ok {
					errs.Add(1)
					continue
				}
				local = append(local, l)
				picks.Add(1)
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return loopResult{picks: picks.Load(), errs: errs.Load(), lat: lat, elapsed: time.Since(start)}
}

// result is a picks run's figures from the loop and the round trips
// counted around it (one of them the count's own INFO).
func (l loopResult) result(replicas, workers int, roundTrips int64) Result {
	return Result{
		Replicas: replicas, Workers: workers, Picks: l.picks,
		PicksPerSecond: float64(l.picks) / l.elapsed.Seconds(),
		P50Micros:      float64(stats.Percentile(l.lat, 50).Microseconds()),
		P99Micros:      float64(stats.Percentile(l.lat, 99).Microseconds()),
		Errors:         l.errs,
		RoundTrips:     float64(roundTrips-1) / float64(max(l.picks, 1)),
	}
}
