package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

func roleSpec(id string, role state.Role) state.WorkerSpec {
	s := spec(id, "m", 4)
	s.Role = role
	return s
}

// blocks is a prompt of n blocks from first (distinct prompts: distinct
// first).
func blocks(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

func snapshotLoads(t *testing.T, store state.Snapshotter) map[string]state.Worker {
	t.Helper()
	snap, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.Worker{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = w
	}
	return out
}

// TestDisaggregationDecidesOnTheDecodeWorkersMatch: a long uncached prompt
// is disaggregated (the ticket names the prefill worker, the decision
// records both picks), the same prompt again lands where it is cached and
// runs aggregated, a prefill worker never takes a whole request, and the
// prefill claim is released at the first token, the decode claim at the
// end.
func TestDisaggregationDecidesOnTheDecodeWorkersMatch(t *testing.T) {
	// predicted (the default) and scored read the live figures; least_loaded
	// does not, so the paired claim adds the prompt for the decider.
	for _, strategy := range []string{"predicted", "scored", "least_loaded"} {
		t.Run(strategy, func(t *testing.T) { decidesOnTheMatch(t, strategy) })
	}
}

func decidesOnTheMatch(t *testing.T, strategy string) {
	ctx := context.Background()
	s, store, rec := newTestScheduler(t, strategy, roleSpec("d0", state.RoleDecode), roleSpec("p0", state.RolePrefill))
	s.opts.Disaggregation.MinUncached = 256
	s.opts.InlineLearning = true
	long := Request{ID: "r1", Model: "m", PromptTokens: 1024, MaxTokens: 100, Blocks: blocks(1, 64)}

	t1, err := s.Admit(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := t1.Prefill(); !ok || p != "p0" || t1.Worker() != "d0" {
		t.Fatalf("long uncached prompt: decode %s prefill %q %v, want d0 with p0", t1.Worker(), p, ok)
	}
	dis := t1.Decision.Disaggregation
	if dis == nil || !dis.Disaggregated || dis.Worker != "p0" || dis.UncachedTokens != 1024 || dis.MinUncachedTokens != 256 || len(dis.Candidates) != 1 {
		t.Fatalf("decision's disaggregation: %+v", dis)
	}
	if len(t1.Decision.Candidates) != 1 || t1.Decision.Candidates[0].Worker != "d0" {
		t.Fatalf("the prefill worker is a decode candidate: %+v", t1.Decision.Candidates)
	}
	w := snapshotLoads(t, store)
	if w["p0"].InFlight != 1 || w["p0"].AheadTokens != 1024 || w["d0"].DecodeTokens != 1124 || w["d0"].PrefillTokens != 0 {
		t.Fatalf("loads after the pair: d0 %+v, p0 %+v", w["d0"], w["p0"])
	}

	t1.FirstToken(50 * time.Millisecond)
	w = snapshotLoads(t, store)
	if w["p0"].InFlight != 0 || w["p0"].PrefillTokens != 0 || w["d0"].InFlight != 1 {
		t.Fatalf("after the first token the prefill claim is still held: d0 %+v, p0 %+v", w["d0"], w["p0"])
	}
	if s.LiveClaims() != 1 {
		t.Fatalf("live claims after the first token: %d, want the decode claim alone", s.LiveClaims())
	}

	// The same prompt again: cached on d0, so aggregated.
	long.ID = "r2"
	t2, err := s.Admit(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := t2.Prefill(); ok || t2.Decision.Disaggregation == nil || t2.Decision.Disaggregation.Disaggregated || t2.Decision.Disaggregation.UncachedTokens != 0 {
		t.Fatalf("cached prompt disaggregated: %+v", t2.Decision.Disaggregation)
	}
	t1.Finish(Outcome{Status: 200})
	t2.Finish(Outcome{Status: 200})
	w = snapshotLoads(t, store)
	if w["d0"].InFlight != 0 || w["p0"].InFlight != 0 || w["d0"].DecodeTokens != 0 || s.LiveClaims() != 0 {
		t.Fatalf("after both finished: d0 %+v, p0 %+v, %d live", w["d0"], w["p0"], s.LiveClaims())
	}
	if n := len(rec.ds); n == 0 {
		t.Fatal("no decision recorded")
	}
}

// TestDisaggregationReleasesThePrefillClaimAtTheEndWithoutAFirstToken: a
// request that fails before its first token (the prefill worker died and
// the decode worker too) gives both claims back at Finish, once.
func TestDisaggregationReleasesThePrefillClaimAtTheEndWithoutAFirstToken(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestScheduler(t, "scored", roleSpec("d0", state.RoleBoth), roleSpec("p0", state.RolePrefill))
	s.opts.Disaggregation.MinUncached = 256
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "m", PromptTokens: 2048, MaxTokens: 10, Blocks: blocks(100, 128)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.Prefill(); !ok {
		t.Fatal("not disaggregated")
	}
	tk.Finish(Outcome{Status: 503, UpstreamFailure: true})
	tk.Finish(Outcome{Status: 503, UpstreamFailure: true})
	w := snapshotLoads(t, store)
	if w["d0"].InFlight != 0 || w["p0"].InFlight != 0 || w["p0"].PrefillTokens != 0 || s.LiveClaims() != 0 {
		t.Fatalf("claims leaked: d0 %+v, p0 %+v, %d live", w["d0"], w["p0"], s.LiveClaims())
	}
}

// TestDisaggregationWithAPrefillWorkerDownRunsAggregated: the snapshot
// still lists the prefill worker, but it turned unhealthy: the paired
// claim skips it and the request runs on the decode worker alone.
func TestDisaggregationWithAPrefillWorkerDownRunsAggregated(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestScheduler(t, "scored", roleSpec("d0", state.RoleDecode), roleSpec("p0", state.RolePrefill))
	s.opts.Disaggregation.MinUncached = 256
	if err := store.SetHealth(ctx, "p0", "unhealthy"); err != nil {
		t.Fatal(err)
	}
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "m", PromptTokens: 1024, MaxTokens: 10, Blocks: blocks(7, 64)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.Prefill(); ok || tk.Worker() != "d0" {
		t.Fatalf("prefill worker down: decode %s, disaggregated %+v", tk.Worker(), tk.Decision.Disaggregation)
	}
	tk.Finish(Outcome{Status: 200})
}

// TestNoPrefillWorkersNoPairedClaim: a fleet without prefill workers (the
// default role) places as before: no disaggregation record.
func TestNoPrefillWorkersNoPairedClaim(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 4))
	tk, err := s.Admit(context.Background(), Request{ID: "r1", Model: "m", PromptTokens: 4096, Blocks: blocks(1, 256)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.Prefill(); ok || tk.Decision.Disaggregation != nil {
		t.Fatalf("disaggregated without prefill workers: %+v", tk.Decision.Disaggregation)
	}
	tk.Finish(Outcome{Status: 200})
}

// TestPrefillOverReleasesThePrefillClaimOnce: the response began, the
// sidecar having fallen back: the prefill claim is released at once as a
// failed request of the prefill worker; the first token and the end
// release nothing more.
func TestPrefillOverReleasesThePrefillClaimOnce(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestScheduler(t, "scored", roleSpec("d0", state.RoleDecode), roleSpec("p0", state.RolePrefill))
	s.opts.Disaggregation.MinUncached = 256
	s.opts.InlineLearning = true
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "m", PromptTokens: 1024, MaxTokens: 10, Blocks: blocks(3, 64)})
	if err != nil {
		t.Fatal(err)
	}
	tk.PrefillOver(true)
	w := snapshotLoads(t, store)
	if w["p0"].InFlight != 0 || w["p0"].Stats.Errors != 1 || w["p0"].Stats.Requests != 1 || w["d0"].InFlight != 1 {
		t.Fatalf("after a failed prefill: d0 %+v, p0 %+v", w["d0"], w["p0"])
	}
	tk.PrefillOver(false)
	tk.FirstToken(10 * time.Millisecond)
	tk.Finish(Outcome{Status: 200})
	w = snapshotLoads(t, store)
	if w["p0"].Stats.Requests != 1 || w["d0"].InFlight != 0 || s.LiveClaims() != 0 {
		t.Fatalf("prefill claim released more than once, or a claim leaked: d0 %+v, p0 %+v", w["d0"], w["p0"])
	}
	// An aggregated ticket ignores it.
	tk2, err := s.Admit(ctx, Request{ID: "r2", Model: "m", PromptTokens: 64, MaxTokens: 10, Blocks: blocks(900, 4)})
	if err != nil {
		t.Fatal(err)
	}
	tk2.PrefillOver(true)
	tk2.Finish(Outcome{Status: 200})
	if w := snapshotLoads(t, store); w["p0"].Stats.Requests != 1 {
		t.Fatalf("an aggregated request touched the prefill worker: %+v", w["p0"])
	}
}
