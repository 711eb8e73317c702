package storetest

import (
	"context"
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// noCap: a worker with no configured cap (max_concurrency 0, Candidate.Cap
// 0) takes any number of claims, until a learned limit bounds it; lifting
// the limit frees it for waiters at once, and a recovering worker still
// takes one probe at a time.
func noCap(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(2, 0)
	register(t, s, specs)
	cands := candidates(specs)
	for i := range 40 {
		if _, w := mustClaim(t, s, cands); w == "" {
			t.Fatalf("claim %d on workers with no cap refused", i)
		}
	}
	if got := inFlight(t, s); got["w0"] != 20 || got["w1"] != 20 {
		t.Fatalf("in flight %v, want 20 each", got)
	}
	putLimit(t, s, "w0", state.Limit{Value: 20})
	putLimit(t, s, "w1", state.Limit{Value: 21})
	if _, w := mustClaim(t, s, cands); w != "w1" {
		t.Fatalf("claim under learned limits 20 and 21 at 20 each: got %q, want w1", w)
	}
	if _, w := mustClaim(t, s, cands); w != "" {
		t.Fatalf("claim past the learned limits landed on %q", w)
	}
	n := subscribe(t, s, "r1")
	if res := enqueue(t, s, "nocap-waiter", cands, state.PriorityStandard, 8, "r1"); !res.Queued {
		t.Fatalf("request at the learned limits not queued: %+v", res)
	}
	putLimit(t, s, "w0", state.Limit{})
	if got := n.next(t); got.Waiter != "nocap-waiter" || got.Worker != "w0" {
		t.Fatalf("notice %+v, want nocap-waiter granted w0", got)
	}
	// A recovering worker with no cap takes one probe at a time.
	register(t, s, []state.WorkerSpec{{ID: "probe", Address: "10.0.3.1:1", Models: []string{"m"}}})
	if err := s.SetHealth(ctx, "probe", scoring.Recovering); err != nil {
		t.Fatal(err)
	}
	one := []state.Candidate{{Worker: "probe"}}
	if _, w := mustClaim(t, s, one); w != "probe" {
		t.Fatalf("recovering worker with no cap refused its probe")
	}
	if _, w := mustClaim(t, s, one); w != "" {
		t.Fatalf("recovering worker took a second request")
	}
}
