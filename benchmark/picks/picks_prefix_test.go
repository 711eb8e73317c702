package picks

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
	o := Options{Workers: 8, Replicas: []int{2}, Duration: 300 * time.Millisecond, Concurrency: 2, Out: io.Discard, Prefix: true}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Picks == 0 || r.Errors > 0 || r.RoundTrips > 2.2 {
			t.Errorf("%d replicas: %d picks, %d errors, %.2f round trips a pick", r.Replicas, r.Picks, r.Errors, r.RoundTrips)
		}
	}
}

// TestPicksAgainstBareLoop: with rounds, each round measures the bare
// claim+release loop, which claims and releases without errors in exactly
// the two scripts a pick, and the scheduler's rate is divided by its.
func TestPicksAgainstBareLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	o := Options{Workers: 8, Replicas: []int{2}, Duration: 300 * time.Millisecond, Concurrency: 2, Out: io.Discard, Rounds: 2}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want one per round", len(res))
	}
	for _, r := range res {
		b := r.Bare
		if b == nil || b.Picks == 0 || b.Errors > 0 || b.RoundTrips < 1.9 || b.RoundTrips > 2.1 || b.Replicas != 2 {
			t.Fatalf("round %d: bare %+v", r.Round, b)
		}
		if r.Picks == 0 || r.RatioToBare != r.PicksPerSecond/b.PicksPerSecond {
			t.Errorf("round %d: %d picks, ratio %.3f, bare %.0f/s", r.Round, r.Picks, r.RatioToBare, b.PicksPerSecond)
		}
	}
}
