package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// This file runs the router's queue in virtual time. Admit blocks while a
// request waits in the queue, so each admission runs on a goroutine of
// its own, and the event loop hands control to one at a time: it starts
// or wakes an admission, then blocks until that admission parks in the
// queue (scheduler.Options.Parked) or returns. The queue's timers are
// events (scheduler.Options.After), and the store's notices are held
// until the admission running has yielded, then delivered one at a time.
// So exactly one goroutine runs at any moment, in an order fixed by the
// event queue: the run is as deterministic as without a queue.

// yielded is an admission giving control back: parked, or done with its
// ticket or error.
type yielded struct {
	i      int
	parked bool
	t      *scheduler.Ticket
	err    error
}

// simTimer is one timer of a waiter (scheduler.Options.After).
type simTimer struct {
	f     func()
	owner int // the request whose admission armed it
	done  bool
}

// notice is a store notice held until no admission runs.
type notice struct {
	fn func(state.Notice)
	n  state.Notice
}

// queueStore is the store as the replicas see it: the memory store, with
// the notices held for the event loop and the waiters' ids known.
type queueStore struct {
	*memory.Store
	r *runner
}

var (
	_ scheduler.Store   = queueStore{}
	_ state.PairClaimer = queueStore{}
)

// Subscribe holds the replica's notices for the event loop to deliver.
func (q queueStore) Subscribe(ctx context.Context, replica string, fn func(state.Notice)) error {
	return q.Store.Subscribe(ctx, replica, func(n state.Notice) {
		q.r.notices = append(q.r.notices, notice{fn: fn, n: n})
	})
}

// Claim notes which request a queued claim id belongs to.
func (q queueStore) Claim(ctx context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	res, err := q.Store.Claim(ctx, req)
	if err == nil && res.Queued {
		q.r.waiting[req.ID] = q.r.running
	}
	return res, err
}

// ClaimPair notes which request a queued paired claim's id belongs to.
func (q queueStore) ClaimPair(ctx context.Context, req state.PairRequest) (state.PairResult, error) {
	res, err := q.Store.ClaimPair(ctx, req)
	if err == nil && res.Queued {
		q.r.waiting[req.ID] = q.r.running
	}
	return res, err
}

// after is scheduler.Options.After on the simulator's clock.
func (r *runner) after(d time.Duration, f func()) func() bool {
	t := &simTimer{f: f, owner: r.running}
	r.timers = append(r.timers, t)
	r.q.push(r.now+d, kindTimer, len(r.timers)-1)
	return func() bool {
		was := !t.done
		t.done = true
		return was
	}
}

// parked is scheduler.Options.Parked: the running admission is waiting.
func (r *runner) parked(id string) {
	i, _ := strconv.Atoi(id)
	r.yield <- yielded{i: i, parked: true}
}

// arrive starts request i's admission by its replica.
func (r *runner) arrive(ctx context.Context, i int) error {
	q := r.reqs[i]
	rep := r.replicas[r.res[i].Replica]
	req := scheduler.Request{
		ID: strconv.Itoa(i), Model: q.model(), PromptTokens: q.Prompt, MaxTokens: q.MaxTokens,
		Blocks: q.Blocks, Stream: true, SLO: r.slo,
	}
	return r.resume(i, func() {
		go func() {
			t, err := rep.Admit(ctx, req)
			r.yield <- yielded{i: i, t: t, err: err}
		}()
	})
}

// fire runs timer k, waking its waiter.
func (r *runner) fire(k int) error {
	t := r.timers[k]
	r.timers[k] = nil
	if t == nil || t.done {
		return nil
	}
	t.done = true
	return r.resume(t.owner, t.f)
}

// resume runs wake, which sets request i's admission going, and blocks
// until it yields.
func (r *runner) resume(i int, wake func()) error {
	r.running = i
	r.admitting[i] = true
	wake()
	y := <-r.yield
	r.running = -1
	if y.parked {
		return nil
	}
	r.admitting[i] = false
	return r.admitted(y.i, y.t, y.err)
}

// settle delivers the notices held, each to its waiter in turn (which
// may cause more).
func (r *runner) settle() error {
	for len(r.notices) > 0 {
		n := r.notices[0]
		r.notices = r.notices[1:]
		i, ok := r.waiting[n.n.Waiter]
		delete(r.waiting, n.n.Waiter)
		if !ok || !r.admitting[i] {
			n.fn(n.n) // no admission waits on it: the scheduler drops it
			continue
		}
		if err := r.resume(i, func() { n.fn(n.n) }); err != nil {
			return err
		}
	}
	return nil
}

// admitted ends request i's admission: refused, or submitted to the GPU
// its replica claimed.
func (r *runner) admitted(i int, t *scheduler.Ticket, err error) error {
	q := r.reqs[i]
	res := &r.res[i]
	if err != nil {
		if errors.Is(err, scheduler.ErrUnknownModel) && q.Adapter != "" {
			res.Outcome = OutcomeMissingAdapter
			r.left--
			return nil
		}
		if errors.Is(err, scheduler.ErrStore) || errors.Is(err, scheduler.ErrUnknownModel) {
			return fmt.Errorf("request %d: %w", i, err)
		}
		res.Outcome = OutcomeRefused
		r.left--
		return nil
	}
	g, ok := r.byID[t.Worker()]
	if !ok {
		return fmt.Errorf("request %d: claimed unknown worker %q", i, t.Worker())
	}
	res.GPU = g
	r.claimed[i] = r.now
	r.placeForMisses(i, g, t.Decision)
	if r.run.Disagg.On() {
		paired, err := r.startPrefill(i, t, g)
		if err != nil {
			return err
		}
		if paired {
			r.tickets[i] = t
			return nil
		}
	}
	err = r.gpus[g].st.SubmitModel(i, q.model(), gpusim.SimRequest{PromptTokens: q.Prompt, OutputTokens: q.Output, Blocks: q.Blocks}, r.now)
	switch {
	case errors.Is(err, gpusim.ErrContextTooLong):
		res.Outcome = OutcomeTooLong
		r.left--
		t.Finish(scheduler.Outcome{Status: 400})
		return nil
	case errors.Is(err, gpusim.ErrBadRequest) && q.Adapter != "":
		// The engine does not serve the adapter: vLLM's 404.
		res.Outcome = OutcomeMissingAdapter
		r.left--
		t.Finish(scheduler.Outcome{Status: 404})
		return nil
	case err != nil:
		return fmt.Errorf("request %d: %w", i, err)
	}
	r.tickets[i] = t
	r.wake(g)
	return nil
}
