package scheduler

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// timers is Options.After on a settable clock: nothing fires until the
// test advances it.
type timers struct {
	mu   sync.Mutex
	c    *clock
	list []*vtimer
}

type vtimer struct {
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
	fired   bool
}

func (ts *timers) after(d time.Duration, f func()) func() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := &vtimer{at: ts.c.now().Add(d), d: d, f: f}
	ts.list = append(ts.list, t)
	return func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		was := !t.stopped && !t.fired
		t.stopped = true
		return was
	}
}

// advance moves the clock by d and runs the timers then due, earliest
// first.
func (ts *timers) advance(d time.Duration) {
	ts.c.add(d)
	ts.mu.Lock()
	var due []*vtimer
	for _, t := range ts.list {
		if !t.stopped && !t.fired && !t.at.After(ts.c.now()) {
			t.fired = true
			due = append(due, t)
		}
	}
	ts.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// armed are the durations of the timers neither fired nor stopped.
func (ts *timers) armed() []time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []time.Duration
	for _, t := range ts.list {
		if !t.stopped && !t.fired {
			out = append(out, t.d)
		}
	}
	return out
}

// waiter runs Admit on its own goroutine and reports where it stopped.
type waiter struct {
	t   *Ticket
	err error
	end chan struct{}
}

// admitAsync starts r's admission and returns once it has claimed, been
// refused, or parked in the queue.
func admitAsync(t *testing.T, s *Scheduler, parked chan string, r Request) *waiter {
	t.Helper()
	w := &waiter{end: make(chan struct{})}
	go func() {
		defer close(w.end)
		w.t, w.err = s.Admit(context.Background(), r)
	}()
	select {
	case id := <-parked:
		if id != r.ID {
			t.Fatalf("parked %q, want %q", id, r.ID)
		}
	case <-w.end:
	}
	return w
}

// resumed waits for w to park again or end.
func resumed(t *testing.T, w *waiter, parked chan string) bool {
	t.Helper()
	select {
	case <-parked:
		return false
	case <-w.end:
		return true
	case <-time.After(10 * time.Second):
		t.Fatal("waiter neither parked nor ended")
	}
	return false
}

func virtualScheduler(t *testing.T, strategy string, c *clock, store *memory.Store) (*Scheduler, *timers, chan string, *recorder) {
	t.Helper()
	ts := &timers{c: c}
	rec := &recorder{}
	parked := make(chan string, 1)
	s, err := New(store, Options{
		Strategy: strategy, ReplicaID: "test", Now: c.now, Recorder: rec, After: ts.after, InlineLearning: true,
		Parked: func(id string) { parked <- id },
		Queue: QueueOptions{
			MaxSize: 4, Timeouts: [3]time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second},
			PollEvery: time.Hour, RequeueAfter: 100 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return s, ts, parked, rec
}

// The queue runs on the caller's clock and timers alone: a waiter arms
// its timeout and poll through Options.After, parks (Options.Parked), is
// granted the worker a release frees through Subscribe's notices, and a
// waiter whose timeout the caller fires leaves with ErrQueueTimeout,
// having waited exactly the virtual time that passed; a waiter that ends
// stops its timers.
func TestVirtualTimeHooks(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	store := memory.New(c.now, state.Limits{})
	if err := store.Register(context.Background(), []state.WorkerSpec{spec("a", "m", 1)}); err != nil {
		t.Fatal(err)
	}
	s, ts, parked, rec := virtualScheduler(t, scoring.RoundRobin, c, store)
	h, err := s.Admit(context.Background(), Request{ID: "hold", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var told time.Duration
	w1 := admitAsync(t, s, parked, Request{ID: "w1", Model: "m", OnQueued: func(d time.Duration) { told = d }})
	if told != 5*time.Second {
		t.Fatalf("OnQueued told %v, want the 5s timeout", told)
	}
	if got := ts.armed(); len(got) != 2 || got[0] != 5*time.Second || got[1] != time.Hour {
		t.Fatalf("armed timers %v, want the timeout and the poll", got)
	}
	ts.advance(2 * time.Second)
	w2 := admitAsync(t, s, parked, Request{ID: "w2", Model: "m"})
	if s.Waiting() != 2 {
		t.Fatalf("%d waiting, want 2", s.Waiting())
	}
	h.Finish(Outcome{Status: 200}) // the release grants a to w1
	if !resumed(t, w1, parked) || w1.err != nil || w1.t.Worker() != "a" || w1.t.Decision.WaitSeconds != 2 {
		t.Fatalf("w1: %v on %v, waited %v; want a after 2s", w1.err, w1.t, w1.t.Decision.WaitSeconds)
	}
	ts.advance(5 * time.Second) // w2's timeout; w1's were stopped
	if !resumed(t, w2, parked) || !errors.Is(w2.err, ErrQueueTimeout) {
		t.Fatalf("w2: %v, want a queue timeout", w2.err)
	}
	if d := lastDecision(t, rec, "w2"); d.WaitSeconds != 5 {
		t.Fatalf("w2 waited %vs, want 5", d.WaitSeconds)
	}
	if got := ts.armed(); len(got) != 0 {
		t.Fatalf("timers left armed: %v", got)
	}
	w1.t.Finish(Outcome{Status: 200})
}

// A grant wakes the waiter, which places itself by its plan (late
// binding): handed a worker where its objective cannot be met, it gives
// it back and rejoins the queue, then claims the worker that meets it.
// Without rebind it ran where the slot freed, over its objective.
func TestGrantRebinds(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	store := memory.New(c.now, state.Limits{})
	ctx := context.Background()
	if err := store.Register(ctx, []state.WorkerSpec{spec("a", "m", 0), spec("b", "m", 0)}); err != nil {
		t.Fatal(err)
	}
	var cs []state.LatencyContribution
	for _, id := range []string{"a", "b"} {
		cs = append(cs, state.LatencyContribution{Worker: id, Model: "m", Stats: trained(400, c.now())})
	}
	if err := store.AddLatency(ctx, cs); err != nil {
		t.Fatal(err)
	}
	s, ts, parked, _ := virtualScheduler(t, scoring.Predicted, c, store)
	on := func(id, worker string, prompt int) *Ticket {
		t.Helper()
		tk, err := s.Admit(ctx, Request{ID: id, Model: "m", PromptTokens: prompt, MaxTokens: 1000, Subset: []string{worker + ":80"}})
		if err != nil || tk.Worker() != worker {
			t.Fatalf("hold %s on %s: %v", id, worker, err)
		}
		return tk
	}
	// a has two requests in flight, b one with a longer prompt, all
	// before their first token: both are over the waiter's objective, and
	// the store's pump prefers b (fewer in flight).
	a1, a2, b1 := on("a1", "a", 1000), on("a2", "a", 1000), on("b1", "b", 2000)
	_, idle, loaded := loads(t, s)
	w := admitAsync(t, s, parked, Request{ID: "w", Model: "m", PromptTokens: 1000, SLO: slo((idle+loaded)/2, 0)})
	if w.err != nil || w.t != nil {
		t.Fatalf("not queued: %v", w.err)
	}
	if err := store.Pump(ctx); err != nil { // hands b to the waiter
		t.Fatal(err)
	}
	if resumed(t, w, parked) {
		t.Fatalf("took the grant over its objective: %v on %v", w.err, w.t.Worker())
	}
	if n := inFlight(t, store, "b"); n != 1 {
		t.Fatalf("b has %d in flight after the grant was given back, want 1", n)
	}
	a1.Finish(Outcome{Status: 200})
	a2.Finish(Outcome{Status: 200})
	ts.advance(100 * time.Millisecond) // rejoins: a is idle now
	if !resumed(t, w, parked) || w.err != nil || w.t.Worker() != "a" {
		t.Fatalf("after rejoining: %v, want a", w.err)
	}
	w.t.Finish(Outcome{Status: 200})
	b1.Finish(Outcome{Status: 200})
}

func inFlight(t *testing.T, store *memory.Store, worker string) int {
	t.Helper()
	return workerState(t, store, worker).InFlight
}
