package picks

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestPicksPoolsDecides: every layout of the pools comparison makes
// decisions without errors, each pool on a cluster master.
func TestPicksPoolsDecides(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Redis Cluster")
	}
	o := Options{Workers: 4, Replicas: []int{2}, Duration: 300 * time.Millisecond, Concurrency: 2, Out: io.Discard}
	res, err := Pools(context.Background(), o, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d layouts measured, want 3", len(res))
	}
	for _, r := range res {
		if r.Picks == 0 || r.Errors > 0 {
			t.Errorf("%s: %d picks, %d errors", r.Layout, r.Picks, r.Errors)
		}
		if r.Pools > 1 && len(r.Masters) != r.Pools {
			t.Errorf("%s: masters %v", r.Layout, r.Masters)
		}
	}
}
