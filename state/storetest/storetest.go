// Package storetest is the conformance suite every state.Store backend
// must pass: memory, Redis (single, Sentinel, Cluster, pooled) and failover
// run the same tests.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Factory returns a fresh, empty store with the given limits.
type Factory func(t *testing.T, l state.Limits) state.Store

// Run runs the whole suite. newStore must return a fresh, empty store each
// call; newPeer (may be nil) returns another handle on the same state, as a
// second replica would have.
func Run(t *testing.T, newStore Factory, newPeer func(t *testing.T, s state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("RegisterMergesWithoutClobbering", func(t *testing.T) { registerMerges(t, newStore(t, def)) })
	t.Run("ClaimPicksLowestLiveScore", func(t *testing.T) { claimPicksLowest(t, newStore(t, def)) })
	t.Run("ClaimSkipsFullUnhealthyDraining", func(t *testing.T) { claimSkips(t, newStore(t, def)) })
	t.Run("ClaimAmongManyCandidates", func(t *testing.T) { manyCandidates(t, newStore(t, def)) })
	t.Run("ReleaseExactlyOnce", func(t *testing.T) { releaseOnce(t, newStore(t, def)) })
	t.Run("MoveFollowsTheServingWorker", func(t *testing.T) { move(t, newStore(t, def)) })
	t.Run("LeaseLapseGivesTheSlotBack", func(t *testing.T) {
		leaseLapse(t, newStore(t, state.Limits{Lease: 300 * time.Millisecond}))
	})
	t.Run("HerdLandsOnePerWorker", func(t *testing.T) {
		s := newStore(t, def)
		herd(t, s, peers(t, s, newPeer, 3), 100)
	})
	t.Run("CapsHoldUnderConcurrency", func(t *testing.T) {
		s := newStore(t, def)
		capsHold(t, s, peers(t, s, newPeer, 3))
	})
	runQueue(t, newStore, newPeer)
	runFair(t, newStore, newPeer)
	runAffinity(t, newStore, newPeer)
	runAdapters(t, newStore, newPeer)
	runAhead(t, newStore, newPeer)
	runCeiling(t, newStore)
	runLatency(t, newStore, newPeer)
	runHealth(t, newStore, newPeer)
	runLimits(t, newStore, newPeer)
	runPair(t, newStore, newPeer)
	t.Run("RegisteredWorkersLeaveWhenHeartbeatsStop", func(t *testing.T) { registeredWorkers(t, newStore(t, def)) })
}

func peers(t *testing.T, s state.Store, newPeer func(*testing.T, state.Store) state.Store, n int) []state.Store {
	out := []state.Store{s}
	for len(out) < n {
		if newPeer == nil {
			out = append(out, s)
			continue
		}
		out = append(out, newPeer(t, s))
	}
	return out
}

func workers(n, cap int) []state.WorkerSpec {
	out := make([]state.WorkerSpec, n)
	for i := range out {
		out[i] = state.WorkerSpec{ID: fmt.Sprintf("w%d", i), Address: fmt.Sprintf("10.0.0.%d:8000", i), Models: []string{"m"}, MaxConcurrency: cap}
	}
	return out
}

// scored curves: equal base, 100 per in-flight request.
func candidates(specs []state.WorkerSpec) []state.Candidate {
	out := make([]state.Candidate, len(specs))
	for i, s := range specs {
		out[i] = state.Candidate{Worker: s.ID, Cap: s.MaxConcurrency, Slope: 100}
	}
	return out
}

var seq atomic.Int64

func claimID() string { return fmt.Sprintf("claim-%d-%d", time.Now().UnixNano(), seq.Add(1)) }

func mustClaim(t *testing.T, s state.Store, cands []state.Candidate) (string, string) {
	t.Helper()
	id := claimID()
	res, err := s.Claim(context.Background(), state.ClaimRequest{ID: id, Candidates: cands})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index < 0 {
		return id, ""
	}
	return id, cands[res.Index].Worker
}

func inFlight(t *testing.T, s state.Store) map[string]int {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = w.InFlight
	}
	return out
}

func register(t *testing.T, s state.Store, specs []state.WorkerSpec) {
	t.Helper()
	if err := s.Register(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
}

func registerMerges(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(2, 4)
	register(t, s, specs)
	id, _ := mustClaim(t, s, candidates(specs))
	if _, err := s.Release(ctx, state.Release{ID: id, Latency: time.Second, Alpha: 0.2}); err != nil {
		t.Fatal(err)
	}
	if _, w := mustClaim(t, s, candidates(specs)); w == "" {
		t.Fatal("no claim")
	}
	if err := s.SetDraining(ctx, "w1", true); err != nil {
		t.Fatal(err)
	}
	// A second replica starts with an updated config: new cap, a new worker.
	specs[0].MaxConcurrency = 8
	register(t, s, append(specs, state.WorkerSpec{ID: "w2", Address: "10.0.0.9:8000", Models: []string{"m"}, MaxConcurrency: 1}))
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]state.Worker{}
	for _, w := range snap.Workers {
		byID[w.Spec.ID] = w
	}
	if len(byID) != 3 || byID["w0"].Spec.MaxConcurrency != 8 {
		t.Fatalf("registry not merged: %+v", snap.Workers)
	}
	total := byID["w0"].InFlight + byID["w1"].InFlight
	if total != 1 || !byID["w1"].Draining || byID["w0"].Stats.Requests+byID["w1"].Stats.Requests != 1 {
		t.Fatalf("live state clobbered by registration: %+v", snap.Workers)
	}
}

func claimPicksLowest(t *testing.T, s state.Store) {
	specs := workers(3, 4)
	register(t, s, specs)
	// w2 has the lowest base; after two claims on it, its live count makes
	// w0 (base 150) cheaper than w2 at 2 (10+2*100).
	cands := []state.Candidate{
		{Worker: "w0", Cap: 4, Base: 150, Slope: 100},
		{Worker: "w1", Cap: 4, Base: 300, Slope: 100},
		{Worker: "w2", Cap: 4, Base: 10, Slope: 100},
	}
	want := []string{"w2", "w2", "w0", "w2", "w0", "w1"}
	for i, w := range want {
		if _, got := mustClaim(t, s, cands); got != w {
			t.Fatalf("claim %d went to %s, want %s (in flight %v)", i, got, w, inFlight(t, s))
		}
	}
	// Multiplicative curves (inference_aware) evaluate at the live count too.
	register(t, s, []state.WorkerSpec{{ID: "x0", Address: "10.0.1.1:1", Models: []string{"m"}, MaxConcurrency: 9}, {ID: "x1", Address: "10.0.1.2:1", Models: []string{"m"}, MaxConcurrency: 9}})
	mult := []state.Candidate{{Worker: "x0", Cap: 9, Base: 1, Mult: 1}, {Worker: "x1", Cap: 9, Base: 1.8, Mult: 1}}
	for i, w := range []string{"x0", "x1", "x0"} { // 1 < 1.8; 2 > 1.8; 1.8*2=3.6 > 2 → x0? 2 < 3.6
		if _, got := mustClaim(t, s, mult); got != w {
			t.Fatalf("multiplicative claim %d went to %s, want %s", i, got, w)
		}
	}
	// Ties go to the earlier candidate.
	register(t, s, []state.WorkerSpec{{ID: "t0", Address: "10.0.2.1:1", Models: []string{"m"}, MaxConcurrency: 1}, {ID: "t1", Address: "10.0.2.2:1", Models: []string{"m"}, MaxConcurrency: 1}})
	if _, got := mustClaim(t, s, []state.Candidate{{Worker: "t1", Cap: 1}, {Worker: "t0", Cap: 1}}); got != "t1" {
		t.Fatalf("tie went to %s, want the first candidate t1", got)
	}
}

func claimSkips(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(3, 1)
	register(t, s, specs)
	if err := s.SetHealth(ctx, "w0", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDraining(ctx, "w1", true); err != nil {
		t.Fatal(err)
	}
	cands := candidates(specs)
	if _, got := mustClaim(t, s, cands); got != "w2" {
		t.Fatalf("claimed %s, want w2 (w0 unhealthy, w1 draining)", got)
	}
	id := claimID()
	res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != -1 || res.Active[2] != 1 || res.Available[0] || res.Available[1] || !res.Available[2] {
		t.Fatalf("want no claim with w2 full: %+v", res)
	}
	if err := s.SetDraining(ctx, "w1", false); err != nil {
		t.Fatal(err)
	}
	if _, got := mustClaim(t, s, cands); got != "w1" {
		t.Fatalf("undrained w1 not claimed: %s", got)
	}
	if err := s.SetHealth(ctx, "nope", scoring.Healthy); err == nil {
		t.Fatal("setting health of an unknown worker must fail")
	}
}

func releaseOnce(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(1, 2)
	register(t, s, specs)
	id, _ := mustClaim(t, s, candidates(specs))
	rel := state.Release{ID: id, Latency: 2 * time.Second, TTFT: 100 * time.Millisecond, TokensPerSec: 40, Alpha: 0.5}
	for i, want := range []bool{true, false, false} {
		got, err := s.Release(ctx, rel)
		if err != nil || got != want {
			t.Fatalf("release %d = %v, %v; want %v", i, got, err, want)
		}
	}
	if n := inFlight(t, s)["w0"]; n != 0 {
		t.Fatalf("in flight %d after release", n)
	}
	id2, _ := mustClaim(t, s, candidates(specs))
	if _, err := s.Release(ctx, state.Release{ID: id2, Latency: 4 * time.Second, Alpha: 0.5}); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot(ctx)
	st := snap.Workers[0].Stats
	if st.Latency.Samples != 2 || st.Latency.Value != 3 || st.TTFT.Samples != 1 || st.TTFT.Value != 0.1 || st.TokensPerSec.Value != 40 || st.Requests != 2 {
		t.Fatalf("averages: %+v", st)
	}
	if st.Latency.Updated.IsZero() || time.Since(st.Latency.Updated) > time.Minute {
		t.Fatalf("last update time not recorded: %v", st.Latency.Updated)
	}
	id3, _ := mustClaim(t, s, candidates(specs))
	if _, err := s.Release(ctx, state.Release{ID: id3, Failed: true, Alpha: 0.5}); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot(ctx)
	if st := snap.Workers[0].Stats; st.Errors != 1 || st.Latency.Samples != 2 {
		t.Fatalf("a failed request counts as an error and feeds no average: %+v", st)
	}
	if ok, err := s.Release(ctx, state.Release{ID: "never-claimed"}); ok || err != nil {
		t.Fatalf("releasing an unknown claim = %v, %v", ok, err)
	}
}

func move(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(2, 1)
	register(t, s, specs)
	id, w := mustClaim(t, s, candidates(specs)[:1])
	if w != "w0" {
		t.Fatalf("claimed %s", w)
	}
	if err := s.Move(ctx, id, "w1"); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(t, s); got["w0"] != 0 || got["w1"] != 1 {
		t.Fatalf("after move: %v", got)
	}
	if _, err := s.Release(ctx, state.Release{ID: id, Alpha: 0.2}); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(t, s); got["w0"] != 0 || got["w1"] != 0 {
		t.Fatalf("after release: %v", got)
	}
	if err := s.Move(ctx, id, "w0"); err == nil {
		t.Fatal("moving a released claim must fail")
	}
}

func leaseLapse(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(1, 2)
	register(t, s, specs)
	kept := claimID()
	lapsed := claimID()
	for _, id := range []string{kept, lapsed} {
		if _, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: candidates(specs)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Renew(ctx, []string{kept}, nil); err != nil {
			t.Fatal(err)
		}
		if inFlight(t, s)["w0"] == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond) // renewing, as a live replica does
	}
	if n := inFlight(t, s)["w0"]; n != 1 {
		t.Fatalf("in flight %d; want the renewed claim only", n)
	}
	if ok, _ := s.Release(ctx, state.Release{ID: lapsed}); ok {
		t.Fatal("a lapsed claim was released again: double count")
	}
	if ok, _ := s.Release(ctx, state.Release{ID: kept}); !ok {
		t.Fatal("the renewed claim was lost")
	}
}

// herd releases len(workers) claims at once, across stores, onto idle
// workers with identical scores, trials times: each trial must land one per
// worker.
func herd(t *testing.T, s state.Store, replicas []state.Store, trials int) {
	const n = 4
	specs := workers(n, 4)
	register(t, s, specs)
	cands := candidates(specs)
	ctx := context.Background()
	for trial := 0; trial < trials; trial++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		ids := make([]string, n)
		got := make([]string, n)
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				ids[i] = claimID()
				res, err := replicas[i%len(replicas)].Claim(ctx, state.ClaimRequest{ID: ids[i], Candidates: cands})
				errs[i] = err
				if err == nil && res.Index >= 0 {
					got[i] = cands[res.Index].Worker
				}
			}(i)
		}
		close(start)
		wg.Wait()
		seen := map[string]bool{}
		for i := range got {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if seen[got[i]] {
				t.Fatalf("trial %d: two requests on %s: %v", trial, got[i], got)
			}
			seen[got[i]] = true
		}
		for _, id := range ids {
			if _, err := s.Release(ctx, state.Release{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// capsHold runs 64 concurrent request loops against 8 workers of cap 2 and
// samples the counts throughout: no worker ever exceeds its cap, and all
// return to 0.
func capsHold(t *testing.T, s state.Store, replicas []state.Store) {
	specs := workers(8, 2)
	register(t, s, specs)
	cands := candidates(specs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held, maxSeen atomic.Int64
	var claimed atomic.Int64
	stop := make(chan struct{})
	sampler := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				sampler <- nil
				return
			default:
			}
			snap, err := s.Snapshot(ctx)
			if err != nil {
				sampler <- err
				return
			}
			for _, w := range snap.Workers {
				if w.InFlight > w.Spec.MaxConcurrency {
					sampler <- fmt.Errorf("%s has %d in flight, cap %d", w.Spec.ID, w.InFlight, w.Spec.MaxConcurrency)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			st := replicas[g%len(replicas)]
			for i := 0; i < 30; i++ {
				id := claimID()
				res, err := st.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Index < 0 {
					continue
				}
				claimed.Add(1)
				if h := held.Add(1); h > maxSeen.Load() {
					maxSeen.Store(h)
				}
				time.Sleep(time.Duration(g%3) * time.Millisecond)
				held.Add(-1)
				if ok, err := st.Release(ctx, state.Release{ID: id}); err != nil || !ok {
					t.Errorf("release: %v %v", ok, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	if err := <-sampler; err != nil {
		t.Fatal(err)
	}
	if m := maxSeen.Load(); m > 16 {
		t.Fatalf("%d claims held at once across 8 workers of cap 2", m)
	}
	if claimed.Load() == 0 {
		t.Fatal("nothing was claimed")
	}
	for id, n := range inFlight(t, s) {
		if n != 0 {
			t.Fatalf("%s left with %d in flight", id, n)
		}
	}
}
