package loadgen

import (
	"context"
	"sync"
	"time"
)

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
