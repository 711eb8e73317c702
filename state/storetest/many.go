package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// manyCandidates: a claim among 40 candidates (the Redis store reads large
// candidate lists differently from small ones) takes them in score order,
// skips the unhealthy and draining, reports each one's count and
// availability, and claims nothing once all are full.
func manyCandidates(t *testing.T, s state.Store) {
	ctx := context.Background()
	const n = 40
	specs := workers(n, 1)
	register(t, s, specs)
	if err := s.SetHealth(ctx, "w3", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDraining(ctx, "w7", true); err != nil {
		t.Fatal(err)
	}
	// Scores fall with the index: w39 first, then w38, ...
	cands := candidates(specs)
	for i := range cands {
		cands[i].Base = float64(n - i)
	}
	var order []string
	for {
		id, got := mustClaim(t, s, cands)
		if got == "" {
			res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
			if err != nil {
				t.Fatal(err)
			}
			for i := range cands {
				wantActive, wantAvail := 1, true
				if i == 3 || i == 7 {
					wantActive, wantAvail = 0, false
				}
				if res.Active[i] != wantActive || res.Available[i] != wantAvail {
					t.Fatalf("%s: active %d available %v, want %d %v", cands[i].Worker, res.Active[i], res.Available[i], wantActive, wantAvail)
				}
			}
			break
		}
		order = append(order, got)
		if len(order) > n {
			t.Fatal("more claims than workers of cap 1")
		}
	}
	var want []string
	for i := n - 1; i >= 0; i-- {
		if i != 3 && i != 7 {
			want = append(want, fmt.Sprintf("w%d", i))
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("claimed %v, want %v", order, want)
	}
}
