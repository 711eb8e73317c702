package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

func runQueue(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("QueueServesPriorityThenArrival", func(t *testing.T) {
		s := newStore(t, def)
		queueOrder(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("QueueAllowanceAndBatchShedding", func(t *testing.T) { queueAllowance(t, newStore(t, def)) })
	t.Run("CancelLeavesTheQueue", func(t *testing.T) { cancel(t, newStore(t, def)) })
	t.Run("GhostWaitersLapse", func(t *testing.T) {
		ghosts(t, newStore(t, state.Limits{Lease: 300 * time.Millisecond}))
	})
	t.Run("GlobalCap", func(t *testing.T) { globalCap(t, newStore(t, state.Limits{Lease: 30 * time.Second, GlobalCap: 2})) })
	t.Run("UndrainAndPumpServeWaiters", func(t *testing.T) { undrain(t, newStore(t, def)) })
}

// notices collects a replica's notices.
type notices struct {
	ch chan state.Notice
}

func subscribe(t *testing.T, s state.Store, replica string) *notices {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := &notices{ch: make(chan state.Notice, 64)}
	if err := s.Subscribe(ctx, replica, func(x state.Notice) { n.ch <- x }); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *notices) next(t *testing.T) state.Notice {
	t.Helper()
	select {
	case x := <-n.ch:
		return x
	case <-time.After(5 * time.Second):
		t.Fatal("no notice")
		return state.Notice{}
	}
}

func (n *notices) none(t *testing.T) {
	t.Helper()
	select {
	case x := <-n.ch:
		t.Fatalf("unexpected notice %+v", x)
	case <-time.After(100 * time.Millisecond):
	}
}

func enqueue(t *testing.T, s state.Store, id string, cands []state.Candidate, priority state.Priority, allow int, replica string) state.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), state.ClaimRequest{
		ID: id, Candidates: cands,
		Queue: &state.QueueSpec{Model: "m", Priority: priority, Allow: allow, Replica: replica},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func release(t *testing.T, s state.Store, id string) {
	t.Helper()
	if ok, err := s.Release(context.Background(), state.Release{ID: id}); err != nil || !ok {
		t.Fatalf("release %s: %v %v", id, ok, err)
	}
}

// queueOrder: one worker of cap 1 is busy; waiters from two replicas are
// served critical first, then by arrival, each freed slot to one waiter,
// and the replica that queued each one hears of its grant.
func queueOrder(t *testing.T, s, peer state.Store) {
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	ra, rb := subscribe(t, s, "ra"), subscribe(t, peer, "rb")
	if res := enqueue(t, s, "first", cands, state.PriorityStandard, 10, "ra"); res.Index != 0 {
		t.Fatalf("the idle worker was not claimed: %+v", res)
	}
	if res := enqueue(t, s, "std-1", cands, state.PriorityStandard, 10, "ra"); !res.Queued || res.Position != 1 {
		t.Fatalf("std-1: %+v", res)
	}
	if res := enqueue(t, peer, "std-2", cands, state.PriorityStandard, 10, "rb"); !res.Queued || res.Position != 2 {
		t.Fatalf("std-2: %+v", res)
	}
	if res := enqueue(t, s, "batch", cands, state.PriorityBatch, 10, "ra"); !res.Queued || res.Position != 3 {
		t.Fatalf("batch: %+v", res)
	}
	if res := enqueue(t, peer, "crit", cands, state.PriorityCritical, 10, "rb"); !res.Queued || res.Position != 1 {
		t.Fatalf("critical must go to the front: %+v", res)
	}
	if st, _ := s.Poll(context.Background(), "std-2"); st.State != state.WaiterQueued || st.Position != 3 {
		t.Fatalf("std-2 after critical: %+v", st)
	}
	for _, want := range []struct {
		prev, next string
		n          *notices
	}{{"first", "crit", rb}, {"crit", "std-1", ra}, {"std-1", "std-2", rb}, {"std-2", "batch", ra}} {
		release(t, s, want.prev) // frees w0: the best waiter takes it
		got := want.n.next(t)
		if got.Waiter != want.next || got.Worker != "w0" || got.Shed {
			t.Fatalf("after releasing %s: notice %+v, want %s granted w0", want.prev, got, want.next)
		}
		if st, _ := peer.Poll(context.Background(), want.next); st.State != state.WaiterGranted || st.Worker != "w0" {
			t.Fatalf("poll %s: %+v", want.next, st)
		}
		if n := inFlight(t, s)["w0"]; n != 1 {
			t.Fatalf("w0 has %d in flight, cap 1", n)
		}
	}
	release(t, s, "batch")
	ra.none(t)
	rb.none(t)
	if n := inFlight(t, s)["w0"]; n != 0 {
		t.Fatalf("left %d in flight", n)
	}
}

// queueAllowance: a full queue refuses a standard request, still admits a
// critical one within its wider allowance, and sheds the newest batch
// waiter for a standard one.
func queueAllowance(t *testing.T, s state.Store) {
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	n := subscribe(t, s, "r")
	enqueue(t, s, "busy", cands, state.PriorityStandard, 2, "r")
	enqueue(t, s, "s1", cands, state.PriorityStandard, 2, "r")
	enqueue(t, s, "s2", cands, state.PriorityStandard, 2, "r")
	if res := enqueue(t, s, "s3", cands, state.PriorityStandard, 2, "r"); !res.QueueFull || res.Queued {
		t.Fatalf("standard past the cap: %+v", res)
	}
	if res := enqueue(t, s, "c1", cands, state.PriorityCritical, 4, "r"); !res.Queued || res.Position != 1 {
		t.Fatalf("critical within its allowance: %+v", res)
	}
	// Batch: shed first.
	if res := enqueue(t, s, "b1", cands, state.PriorityBatch, 5, "r"); !res.Queued {
		t.Fatalf("batch: %+v", res)
	}
	if res := enqueue(t, s, "b2", cands, state.PriorityBatch, 5, "r"); !res.Queued {
		t.Fatalf("batch: %+v", res)
	}
	// The queue holds c1, s1, s2, b1, b2: full for a standard request
	// (allow 5); the newest batch waiter, b2, gives up its place.
	if res := enqueue(t, s, "s4", cands, state.PriorityStandard, 5, "r"); !res.Queued || res.Position != 4 {
		t.Fatalf("standard shedding batch: %+v", res)
	}
	if got := n.next(t); got.Waiter != "b2" || !got.Shed {
		t.Fatalf("notice %+v, want b2 shed", got)
	}
	if st, _ := s.Poll(context.Background(), "b2"); st.State != state.WaiterGone {
		t.Fatalf("shed waiter still there: %+v", st)
	}
	if st, _ := s.Poll(context.Background(), "b1"); st.State != state.WaiterQueued {
		t.Fatalf("older batch waiter lost: %+v", st)
	}
}

func cancel(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	n := subscribe(t, s, "r")
	enqueue(t, s, "busy", cands, state.PriorityStandard, 10, "r")
	enqueue(t, s, "gone", cands, state.PriorityStandard, 10, "r")
	enqueue(t, s, "stays", cands, state.PriorityStandard, 10, "r")
	if st, err := s.Cancel(ctx, "gone"); err != nil || st.State != state.WaiterRemoved {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	release(t, s, "busy")
	if got := n.next(t); got.Waiter != "stays" {
		t.Fatalf("the cancelled waiter was served: %+v", got)
	}
	// Cancelling after the grant reports it: the caller must release.
	if st, _ := s.Cancel(ctx, "stays"); st.State != state.WaiterGranted || st.Worker != "w0" {
		t.Fatalf("cancel after grant: %+v", st)
	}
	release(t, s, "stays")
	if st, _ := s.Cancel(ctx, "stays"); st.State != state.WaiterGone {
		t.Fatalf("cancel after release: %+v", st)
	}
	if n := inFlight(t, s)["w0"]; n != 0 {
		t.Fatalf("left %d in flight", n)
	}
}

// ghosts: waiters whose replica stopped renewing them leave the queue
// within the lease; renewed ones stay.
func ghosts(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 1))
	cands := candidates(workers(1, 1))
	enqueue(t, s, "busy", cands, state.PriorityStandard, 10, "r")
	enqueue(t, s, "ghost", cands, state.PriorityStandard, 10, "dead")
	enqueue(t, s, "alive", cands, state.PriorityStandard, 10, "r")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Renew(ctx, []string{"busy"}, []string{"alive"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Pump(ctx); err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Poll(ctx, "ghost"); st.State == state.WaiterGone {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := s.Poll(ctx, "ghost"); st.State != state.WaiterGone {
		t.Fatalf("ghost waiter still queued: %+v", st)
	}
	if st, _ := s.Poll(ctx, "alive"); st.State != state.WaiterQueued || st.Position != 1 {
		t.Fatalf("renewed waiter: %+v", st)
	}
}

func globalCap(t *testing.T, s state.Store) {
	register(t, s, workers(3, 4))
	cands := candidates(workers(3, 4))
	n := subscribe(t, s, "r")
	enqueue(t, s, "a", cands, state.PriorityStandard, 10, "r")
	enqueue(t, s, "b", cands, state.PriorityStandard, 10, "r")
	if res := enqueue(t, s, "c", cands, state.PriorityStandard, 10, "r"); !res.Queued {
		t.Fatalf("past the global cap the request must queue: %+v", res)
	}
	release(t, s, "a")
	if got := n.next(t); got.Waiter != "c" {
		t.Fatalf("notice %+v", got)
	}
	total := 0
	for _, v := range inFlight(t, s) {
		total += v
	}
	if total != 2 {
		t.Fatalf("%d in flight, global cap 2", total)
	}
}

// undrain: a drained worker frees nothing, but undraining it (or a pump)
// serves the waiters at once.
func undrain(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(2, 1)
	register(t, s, specs)
	cands := candidates(specs)
	n := subscribe(t, s, "r")
	if err := s.SetDraining(ctx, "w1", true); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, "busy", cands, state.PriorityStandard, 10, "r")
	if res := enqueue(t, s, "waits", cands, state.PriorityStandard, 10, "r"); !res.Queued {
		t.Fatalf("%+v", res)
	}
	if err := s.SetDraining(ctx, "w1", false); err != nil {
		t.Fatal(err)
	}
	if got := n.next(t); got.Waiter != "waits" || got.Worker != "w1" {
		t.Fatalf("undrained worker not handed to the waiter: %+v", got)
	}
}
