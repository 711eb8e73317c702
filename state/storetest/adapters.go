package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// runAdapters checks LoRA adapter placement: what a claim naming an
// adapter reads, prices and places, shared across replicas, and how
// releases, lapses and the engine's reports change it.
func runAdapters(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("AdapterPlacementSharedAcrossReplicas", func(t *testing.T) {
		s := newStore(t, def)
		adapterShared(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("AdapterColdHerdPlacesOnce", func(t *testing.T) {
		s := newStore(t, def)
		adapterHerd(t, peers(t, s, newPeer, 3))
	})
	t.Run("AdapterEvictsLeastRecentIdle", func(t *testing.T) { adapterEvict(t, newStore(t, def)) })
	t.Run("AdapterPlacementGoesWithLapsedLease", func(t *testing.T) {
		adapterLapse(t, newStore(t, state.Limits{Lease: 300 * time.Millisecond}))
	})
	t.Run("AdapterPlacementFollowsEngineReport", func(t *testing.T) { adapterReport(t, newStore(t, def)) })
}

// adapterCands prices idle 1, a load 10 and an eviction 10 more, on
// workers of slots slots, with equal curves.
func adapterCands(slots int, ids ...string) []state.Candidate {
	out := make([]state.Candidate, len(ids))
	for i, id := range ids {
		out[i] = state.Candidate{Worker: id, Cap: 100, Adapter: scoring.AdapterWeights{Idle: 1, Load: 10, Evict: 10, Slots: slots}}
	}
	return out
}

func claimAdapter(t *testing.T, s state.Store, cands []state.Candidate, adapter string) (string, state.ClaimResult) {
	t.Helper()
	id := claimID()
	res, err := s.Claim(context.Background(), state.ClaimRequest{ID: id, Candidates: cands, Adapter: adapter})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Adapter) != len(cands) {
		t.Fatalf("adapter states for %d of %d candidates", len(res.Adapter), len(cands))
	}
	return id, res
}

// placements returns each worker's placements by adapter.
func placements(t *testing.T, s state.Store) map[string]map[string]state.AdapterPlacement {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]state.AdapterPlacement{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = map[string]state.AdapterPlacement{}
		for _, p := range w.Adapters {
			out[w.Spec.ID][p.Name] = p
		}
	}
	return out
}

// adapterShared: a's first claim places it on the winner; the second
// replica's claim finds it active there and free elsewhere, and follows
// it; releases leave it placed, idle.
func adapterShared(t *testing.T, a, b state.Store) {
	register(t, a, workers(2, 100))
	cands := adapterCands(2, "w0", "w1")
	id1, res := claimAdapter(t, a, cands, "sql")
	if res.Index != 0 || res.Adapter[0] != scoring.AdapterFree || res.Adapter[1] != scoring.AdapterFree || res.Evicted != "" {
		t.Fatalf("first claim: index %d, states %v, evicted %q; want w0 (tie), both free", res.Index, res.Adapter, res.Evicted)
	}
	// w1 first: only the placement can make w0 win.
	id2, res := claimAdapter(t, b, adapterCands(2, "w1", "w0"), "sql")
	if res.Index != 1 || res.Adapter[0] != scoring.AdapterFree || res.Adapter[1] != scoring.AdapterActive {
		t.Fatalf("second replica's claim: index %d, states %v; want w0, where sql is active", res.Index, res.Adapter)
	}
	if p := placements(t, b)["w0"]["sql"]; p.Active != 2 || p.Used.IsZero() {
		t.Fatalf("w0's sql placement %+v; want 2 running", p)
	}
	release(t, a, id1)
	release(t, b, id2)
	ps := placements(t, a)
	if p, ok := ps["w0"]["sql"]; !ok || p.Active != 0 {
		t.Fatalf("after releases w0 holds %+v; want sql placed, idle", ps["w0"])
	}
	if len(ps["w1"]) != 0 {
		t.Fatalf("w1 holds %+v; want nothing", ps["w1"])
	}
	_, res = claimAdapter(t, b, adapterCands(2, "w1", "w0"), "sql")
	if res.Index != 1 || res.Adapter[1] != scoring.AdapterIdle {
		t.Fatalf("claim after releases: index %d, states %v; want w0, idle", res.Index, res.Adapter)
	}
}

// adapterHerd: many simultaneous claims for one cold adapter, from three
// replicas, each listing the workers in another order (ties go to the
// first), place it on one worker only.
func adapterHerd(t *testing.T, ss []state.Store) {
	register(t, ss[0], workers(4, 100))
	ids := []string{"w0", "w1", "w2", "w3"}
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := range 30 {
		cands := adapterCands(4, append(ids[i%4:], ids[:i%4]...)...)
		wg.Add(1)
		go func(s state.Store) {
			defer wg.Done()
			if _, err := s.Claim(context.Background(), state.ClaimRequest{ID: claimID(), Candidates: cands, Adapter: "hot"}); err != nil {
				errs <- err
			}
		}(ss[i%len(ss)])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	holders, running := 0, 0
	for _, ps := range placements(t, ss[0]) {
		if p, ok := ps["hot"]; ok {
			holders++
			running += p.Active
		}
	}
	if holders != 1 || running != 30 {
		t.Fatalf("hot placed on %d workers with %d running; want 1 worker, 30", holders, running)
	}
}

// adapterEvict: with one slot, a second adapter evicts the idle first;
// a running one is never evicted.
func adapterEvict(t *testing.T, s state.Store) {
	register(t, s, workers(1, 100))
	cands := adapterCands(1, "w0")
	id, _ := claimAdapter(t, s, cands, "a")
	release(t, s, id)
	id, res := claimAdapter(t, s, cands, "b")
	if res.Index != 0 || res.Adapter[0] != scoring.AdapterEvict || res.Evicted != "a" {
		t.Fatalf("claim for b: index %d, states %v, evicted %q; want evict a", res.Index, res.Adapter, res.Evicted)
	}
	if ps := placements(t, s)["w0"]; len(ps) != 1 || ps["b"].Active != 1 {
		t.Fatalf("w0 holds %+v; want b alone, running", ps)
	}
	// b runs: c must wait for a slot, not throw b out.
	_, res = claimAdapter(t, s, cands, "c")
	if res.Index != 0 || res.Adapter[0] != scoring.AdapterEvict || res.Evicted != "" {
		t.Fatalf("claim for c: index %d, states %v, evicted %q; want evict state, nothing evicted", res.Index, res.Adapter, res.Evicted)
	}
	if ps := placements(t, s)["w0"]; len(ps) != 2 {
		t.Fatalf("w0 holds %+v; want b and c", ps)
	}
	release(t, s, id)
}

// adapterLapse: a claim whose lease lapses gives its request on the
// adapter back.
func adapterLapse(t *testing.T, s state.Store) {
	register(t, s, workers(1, 100))
	claimAdapter(t, s, adapterCands(2, "w0"), "a")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, ok := placements(t, s)["w0"]["a"]; ok && p.Active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a still running on w0 after its lease: %+v", placements(t, s)["w0"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adapterReport: the engine's report drops an idle placement it no
// longer holds, keeps a running one whatever it says, and adds one it
// runs that no claim placed.
func adapterReport(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 100))
	cands := adapterCands(4, "w0")
	id, _ := claimAdapter(t, s, cands, "idle")
	release(t, s, id)
	held, _ := claimAdapter(t, s, cands, "busy")
	at := time.Now()
	rep := state.AdapterReport{Running: []string{"other"}, MaxLoras: 4, At: at}
	if err := s.PutTelemetry(ctx, map[string]state.Telemetry{"w0": {At: at, Adapters: rep}}); err != nil {
		t.Fatal(err)
	}
	ps := placements(t, s)["w0"]
	if _, ok := ps["idle"]; ok {
		t.Fatalf("w0 holds %+v; want idle dropped: its engine no longer holds it", ps)
	}
	if ps["busy"].Active != 1 {
		t.Fatalf("w0 holds %+v; want busy kept, running", ps)
	}
	if p, ok := ps["other"]; !ok || p.Active != 0 {
		t.Fatalf("w0 holds %+v; want other added, idle", ps)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Workers[0].Telemetry.Adapters; got.MaxLoras != 4 || len(got.Running) != 1 || got.At.IsZero() {
		t.Fatalf("report in the snapshot %+v; want the one put", got)
	}
	release(t, s, held)
}
