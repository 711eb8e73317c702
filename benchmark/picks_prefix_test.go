package benchmark

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestPicksPrefixDecides: with the prefix and token-load terms on, the
// picks run decides without errors in two round trips a pick.
func TestPicksPrefixDecides(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	o := PicksOptions{Workers: 8, Replicas: []int{2}, Duration: 300 * time.Millisecond, Concurrency: 2, Out: io.Discard, Prefix: true}
	res, err := Picks(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Picks == 0 || r.Errors > 0 || r.RoundTrips > 2.2 {
			t.Errorf("%d replicas: %d picks, %d errors, %.2f round trips a pick", r.Replicas, r.Picks, r.Errors, r.RoundTrips)
		}
	}
}
