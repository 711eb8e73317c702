package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

func runFair(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("FairQueueAlternatesTenants", func(t *testing.T) {
		s := newStore(t, def)
		fairAlternates(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("FairQueueWeighsCosts", func(t *testing.T) { fairWeighs(t, newStore(t, def)) })
	t.Run("FairQueueKeepsStrictPriority", func(t *testing.T) { fairPriority(t, newStore(t, def)) })
	t.Run("FairQueueLiftsReturningTenant", func(t *testing.T) { fairLift(t, newStore(t, def)) })
	t.Run("FairQueueGivesBackUnproducedOutput", func(t *testing.T) { fairRefund(t, newStore(t, def)) })
	t.Run("FairQueueCountersDecay", func(t *testing.T) {
		fairDecay(t, newStore(t, state.Limits{Lease: 30 * time.Second, FairHalfLife: 20 * time.Millisecond}), true)
		fairDecay(t, newStore(t, def), false)
	})
}

// fairWaiter is one request of a fair-queue test.
type fairWaiter struct {
	id, tenant string
	priority   state.Priority
	cost       float64
}

// fairClaim claims (or queues for) model m's workers as tenant's request.
func fairClaim(t *testing.T, s state.Store, cands []state.Candidate, w fairWaiter, replica string) state.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), state.ClaimRequest{
		ID: w.id, Candidates: cands,
		Queue: &state.QueueSpec{Model: "m", Priority: w.priority.OrStandard(), Allow: 100, Replica: replica, Tenant: w.tenant, Cost: w.cost},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// grantOrder releases holder, then each waiter granted in turn but the
// last, and returns the order in which the waiters were granted the one
// worker.
func grantOrder(t *testing.T, s state.Store, holder string, waiting []string) []string {
	t.Helper()
	var out []string
	left := slices.Clone(waiting)
	for len(left) > 0 {
		release(t, s, holder)
		holder = ""
		for i, id := range left {
			st, err := s.Poll(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State == state.WaiterGranted {
				if holder != "" {
					t.Fatalf("one free slot granted to %s and %s", holder, id)
				}
				holder = id
				left = slices.Delete(left, i, i+1)
				break
			}
		}
		if holder == "" {
			t.Fatalf("no waiter granted; left %v, order so far %v", left, out)
		}
		out = append(out, holder)
	}
	return out
}

// queueAll makes w0 (cap 1) busy and queues ws, alternating between the
// two replicas' handles, and returns the busy claim's id.
func queueAll(t *testing.T, s, peer state.Store, ws []fairWaiter) string {
	t.Helper()
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	busy := fmt.Sprintf("busy-%d", seq.Add(1))
	if res, err := s.Claim(context.Background(), state.ClaimRequest{ID: busy, Candidates: cands}); err != nil || res.Index != 0 {
		t.Fatalf("busy claim: %+v %v", res, err)
	}
	for i, w := range ws {
		h := s
		if i%2 == 1 {
			h = peer
		}
		if res := fairClaim(t, h, cands, w, "r"); !res.Queued {
			t.Fatalf("%s not queued: %+v", w.id, res)
		}
	}
	return busy
}

func ids(ws []fairWaiter) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.id
	}
	return out
}

func wantOrder(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

// fairAlternates: tenant a queues four, then b two; equal costs alternate
// the grants (FCFS would serve a's four first), whichever replica queued
// each, and a cancelled waiter leaves its tenant's turn to the next.
func fairAlternates(t *testing.T, s, peer state.Store) {
	ws := []fairWaiter{
		{id: "a1", tenant: "a", cost: 10},
		{id: "a2", tenant: "a", cost: 10},
		{id: "a3", tenant: "a", cost: 10},
		{id: "a4", tenant: "a", cost: 10},
		{id: "b1", tenant: "b", cost: 10},
		{id: "b2", tenant: "b", cost: 10},
		{id: "b3", tenant: "b", cost: 10},
	}
	busy := queueAll(t, s, peer, ws)
	if st, err := s.Cancel(context.Background(), "b2"); err != nil || st.State != state.WaiterRemoved {
		t.Fatalf("cancel b2: %+v %v", st, err)
	}
	wantOrder(t, grantOrder(t, s, busy, slices.DeleteFunc(ids(ws), func(id string) bool { return id == "b2" })),
		"a1", "b1", "a2", "b3", "a3", "a4")
}

// fairWeighs: a's requests cost half of b's (a weight of 2): a is served
// twice as often while both are backlogged.
func fairWeighs(t *testing.T, s state.Store) {
	var ws []fairWaiter
	for i := range 4 {
		ws = append(ws, fairWaiter{id: fmt.Sprintf("a%d", i+1), tenant: "a", cost: 5})
	}
	for i := range 4 {
		ws = append(ws, fairWaiter{id: fmt.Sprintf("b%d", i+1), tenant: "b", cost: 10})
	}
	busy := queueAll(t, s, s, ws)
	// Counters a 0 b 0 → a1 (a 5) → b1 (b 10) → a2 (a 10) → tie, older
	// head a3 (a 15) → b2 (b 20) → a4 (a 20) → b3, b4.
	wantOrder(t, grantOrder(t, s, busy, ids(ws)), "a1", "b1", "a2", "a3", "b2", "a4", "b3", "b4")
}

// fairPriority: a critical waiter of the most-served tenant still goes
// before every standard one, and batch comes last; a's critical service
// counts against it in the standard band too.
func fairPriority(t *testing.T, s state.Store) {
	ws := []fairWaiter{
		{id: "a-std", tenant: "a", cost: 1},
		{id: "b-batch", tenant: "b", cost: 1, priority: state.PriorityBatch},
		{id: "b-std", tenant: "b", cost: 1},
		{id: "a-crit", tenant: "a", cost: 1e6, priority: state.PriorityCritical},
		{id: "a-crit2", tenant: "a", cost: 1, priority: state.PriorityCritical},
	}
	busy := queueAll(t, s, s, ws)
	wantOrder(t, grantOrder(t, s, busy, ids(ws)), "a-crit", "a-crit2", "b-std", "a-std", "b-batch")
}

// fairLift: while b is served alone its counter grows; a tenant arriving
// then starts at b's counter, not at zero, so the two alternate instead of
// a taking every slot until it catches up.
func fairLift(t *testing.T, s state.Store) {
	var ws []fairWaiter
	for i := range 6 {
		ws = append(ws, fairWaiter{id: fmt.Sprintf("b%d", i+1), tenant: "b", cost: 10})
	}
	busy := queueAll(t, s, s, ws)
	grantOrder(t, s, busy, []string{"b1", "b2", "b3"})
	cands := candidates(workers(1, 1))
	// b3 holds w0; b4..b6 still wait (counter b 30).
	late := []fairWaiter{{id: "a1", tenant: "a", cost: 10}, {id: "a2", tenant: "a", cost: 10}, {id: "a3", tenant: "a", cost: 10}}
	for _, w := range late {
		if res := fairClaim(t, s, cands, w, "r"); !res.Queued {
			t.Fatalf("%s not queued: %+v", w.id, res)
		}
	}
	wantOrder(t, grantOrder(t, s, "b3", []string{"b4", "b5", "b6", "a1", "a2", "a3"}), "b4", "a1", "b5", "a2", "b6", "a3")
}

// fairDecay: a was served far more than b long ago (many half-lives).
// b queues three, then a three: with decay a's debt is forgotten, it is
// lifted to b's counter and the two alternate; without, b goes first
// until it has caught up.
func fairDecay(t *testing.T, s state.Store, decays bool) {
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	heavy := fairWaiter{id: fmt.Sprintf("heavy-%d", seq.Add(1)), tenant: "a", cost: 1e6}
	if res := fairClaim(t, s, cands, heavy, "r"); res.Index != 0 {
		t.Fatalf("heavy: %+v", res)
	}
	release(t, s, heavy.id)
	if decays {
		time.Sleep(700 * time.Millisecond) // 35 half-lives: a's 1e6 is under 0.01
	}
	light := fairWaiter{id: fmt.Sprintf("light-%d", seq.Add(1)), tenant: "b", cost: 10}
	if res := fairClaim(t, s, cands, light, "r"); res.Index != 0 {
		t.Fatalf("light: %+v", res)
	}
	var ws []fairWaiter // light holds w0: b's three then a's queue
	for _, tenant := range []string{"b", "b", "b", "a", "a", "a"} {
		ws = append(ws, fairWaiter{id: fmt.Sprintf("%s-%d", tenant, seq.Add(1)), tenant: tenant, cost: 10})
	}
	for _, w := range ws {
		if res := fairClaim(t, s, cands, w, "r"); !res.Queued {
			t.Fatalf("%s not queued: %+v", w.id, res)
		}
	}
	want := ids(ws)
	if decays {
		want = []string{want[0], want[3], want[1], want[4], want[2], want[5]}
	}
	wantOrder(t, grantOrder(t, s, light.id, ids(ws)), want...)
}

// fairRefund: each request is charged 20 prompt tokens and 40 output
// tokens at 2 each (100); a release that reports 5 output tokens gives
// 70 back. a's short answers let its third request go before b's second,
// which without the refunds (counters a 200, b 100) would go first.
func fairRefund(t *testing.T, s state.Store) {
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	busy := fmt.Sprintf("busy-%d", seq.Add(1))
	if res, err := s.Claim(context.Background(), state.ClaimRequest{ID: busy, Candidates: cands}); err != nil || res.Index != 0 {
		t.Fatalf("busy claim: %+v %v", res, err)
	}
	var ids []string
	for _, id := range []string{"a1", "a2", "a3", "b1", "b2"} {
		ids = append(ids, id)
		res, err := s.Claim(context.Background(), state.ClaimRequest{ID: id, Candidates: cands, Queue: &state.QueueSpec{
			Model: "m", Allow: 10, Replica: "r", Tenant: id[:1], Cost: 100, ChargedOutput: 40, OutputCost: 2,
		}})
		if err != nil || !res.Queued {
			t.Fatalf("%s: %+v %v", id, res, err)
		}
	}
	// Each granted request reports its output when released: a's 5
	// tokens, b's all 40 (and the busy claim none: no fair charge).
	out := map[string]int{"a1": 5, "a2": 5, "a3": 5, "b1": 40, "b2": 40}
	holder, left, order := busy, ids, []string(nil)
	for len(left) > 0 {
		if ok, err := s.Release(context.Background(), state.Release{ID: holder, OutputTokens: out[holder]}); err != nil || !ok {
			t.Fatalf("release %s: %v %v", holder, ok, err)
		}
		holder = ""
		for i, id := range left {
			if st, err := s.Poll(context.Background(), id); err != nil {
				t.Fatal(err)
			} else if st.State == state.WaiterGranted {
				holder, left = id, slices.Delete(left, i, i+1)
				break
			}
		}
		if holder == "" {
			t.Fatalf("no waiter granted; order so far %v", order)
		}
		order = append(order, holder)
	}
	wantOrder(t, order, "a1", "b1", "a2", "a3", "b2")
}
