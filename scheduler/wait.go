package scheduler

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file holds the wait of a queued request: its timers, the notices
// that end it, and late binding, the placement of a waiter when a worker
// is handed to it.

// DefaultRequeueAfter is QueueOptions.RequeueAfter when unset.
const DefaultRequeueAfter = 100 * time.Millisecond

// afterFunc is time.AfterFunc as Options.After: the wall clock's timers.
func afterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// wake is a timer's callback that wakes a waiter reading c (buffered 1;
// a second firing before the first is read is one wake-up).
func wake(c chan struct{}) func() {
	return func() {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// wait holds a queued request until a worker is handed to it, its
// priority's timeout passes, it is shed, or the client leaves.
//
// A worker handed over is a wake-up, not a placement (late binding): the
// store hands a freed slot to the queue's head, whatever its prefix or
// objectives, so the waiter places itself again by the same plan over
// every eligible worker, on live figures (rebind). When no worker meets
// its objectives, it gives the slot back and rejoins the queue
// RequeueAfter later, within the same timeout.
func (s *Scheduler) wait(ctx context.Context, r Request, d *Decision, id string, start time.Time, p pending) (*Ticket, error) {
	timeout := s.opts.Queue.Timeouts[r.Priority.Rank()]
	// The TTFT objective bounds the wait once some worker could meet it
	// idle: past that, none can.
	byObjective := p.bound.on && p.bound.wait-start.Sub(d.Time) < timeout
	if byObjective {
		timeout = max(p.bound.wait-start.Sub(d.Time), 0)
	}
	ctx, span := s.startSpan(ctx, SpanQueue, AttrQueuePosition.Int(d.QueuePosition))
	defer func() {
		span.SetAttributes(AttrOutcome.String(d.Outcome))
		span.End()
	}()
	ch := make(chan state.Notice, 1)
	s.enqueue(id, ch)
	defer func() {
		if id != "" {
			s.dequeue(id)
		}
	}()
	fired, polled, rejoin := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	stopTimeout := s.opts.After(timeout, wake(fired))
	defer stopTimeout()
	stopPoll := s.opts.After(s.opts.Queue.PollEvery, wake(polled))
	defer func() { stopPoll() }()
	stopRejoin := func() bool { return false }
	defer func() { stopRejoin() }()
	if r.OnQueued != nil {
		r.OnQueued(timeout)
	}
	if ce := s.log.Check(zap.DebugLevel, "queued"); ce != nil {
		ce.Write(zap.String("request_id", r.ID), zap.String("model", r.Model), zap.String("priority", string(r.Priority)), zap.Int("position", d.QueuePosition))
	}
	shed := func() error {
		d.WaitSeconds = s.now().Sub(start).Seconds()
		return s.fail(d, OutcomeShed, "shed", &RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrShed), After: retryAfterBusy})
	}
	// bind places the request, worker handed to it under the waiter's id.
	bind := func(worker string) (*Ticket, bool) {
		d.WaitSeconds = s.now().Sub(start).Seconds()
		t, requeue := s.rebind(ctx, r, d, id, worker, p)
		if requeue {
			s.dequeue(id)
			id = ""
			stopRejoin = s.opts.After(s.opts.Queue.RequeueAfter, wake(rejoin))
		}
		return t, requeue
	}
	// leave takes the request out of the queue; a slot handed to it in the
	// meantime is kept (keep) or given back.
	leave := func(keep bool) (string, error) {
		if id == "" {
			return "", nil
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		st, err := s.store.Cancel(cctx, id)
		if err != nil {
			return "", err
		}
		if st.State != state.WaiterGranted {
			return "", nil
		}
		if keep {
			return st.Worker, nil
		}
		_, err = s.store.Release(cctx, state.Release{ID: id})
		return "", err
	}
	for {
		if s.opts.Parked != nil {
			s.opts.Parked(r.ID)
		}
		select {
		case n := <-ch:
			if n.Shed {
				return nil, shed()
			}
			if t, requeue := bind(n.Worker); !requeue {
				return t, nil
			}
		case <-polled:
			stopPoll = s.opts.After(s.opts.Queue.PollEvery, wake(polled))
			if id == "" {
				continue
			}
			st, err := s.store.Poll(ctx, id)
			if err != nil {
				continue
			}
			switch st.State {
			case state.WaiterGranted:
				if t, requeue := bind(st.Worker); !requeue {
					return t, nil
				}
			case state.WaiterGone:
				return nil, shed()
			}
		case <-rejoin:
			d.WaitSeconds = s.now().Sub(start).Seconds()
			t, queued, err := s.rejoin(ctx, r, d, &p)
			if queued == nil {
				return t, err
			}
			id = queued.id
			s.enqueue(id, ch)
		case <-fired:
			if w, err := leave(true); err == nil && w != "" {
				// The slot arrived as the timer fired: use it.
				d.WaitSeconds = s.now().Sub(start).Seconds()
				f, ceiling := s.grantFeatures(p, w)
				return s.admitted(d, r, id, w, f, ceiling, scoring.AdapterNone), nil
			}
			d.WaitSeconds = s.now().Sub(start).Seconds()
			if byObjective {
				return nil, s.fail(d, OutcomeObjectiveUnmet, "slo_unattainable", &RetryAfter{
					Err: fmt.Errorf("%s after %s, TTFT objective %s: %w", r.Model, timeout, p.job.Objectives.TTFT, ErrObjectiveUnmet), After: retryAfterBusy,
				})
			}
			return nil, s.fail(d, OutcomeQueueTimeout, "queue_timeout",
				&RetryAfter{Err: fmt.Errorf("%s after %s: %w", r.Model, timeout, ErrQueueTimeout), After: retryAfterBusy})
		case <-ctx.Done():
			_, _ = leave(false)
			d.WaitSeconds = s.now().Sub(start).Seconds()
			return nil, s.fail(d, OutcomeAbandoned, "client_gone", ctx.Err())
		}
	}
}

func (s *Scheduler) enqueue(id string, ch chan state.Notice) {
	s.mu.Lock()
	s.waiters[id] = ch
	s.mu.Unlock()
}

func (s *Scheduler) dequeue(id string) {
	s.mu.Lock()
	delete(s.waiters, id)
	s.mu.Unlock()
}

// rebind places a waiter that was handed worker under grant: it claims,
// on the live figures and without queueing, the best of every eligible
// worker by the same plan as an arrival (its prefix match, its predicted
// latency, its objectives), then gives the grant back. The store's grant
// went to the head of the queue on whichever worker freed; this puts the
// request where the strategy would. When no worker can take it:
//   - the grant is kept when the request was waiting for capacity (the
//     handed slot is the capacity that freed);
//   - when some worker had room but none met the request's objectives
//     (the strategy's ceilings), the grant is given back and requeue is
//     true: the request waits for one that can, until its objective
//     bound.
//
// The claim sees the grant's hold on worker, so that worker looks a
// little busier than it is to this request: it is chosen only when
// better even so.
func (s *Scheduler) rebind(ctx context.Context, r Request, d *Decision, grant, worker string, p pending) (t *Ticket, requeue bool) {
	keep := func() *Ticket {
		f, ceiling := s.grantFeatures(p, worker)
		return s.admitted(d, r, grant, worker, f, ceiling, scoring.AdapterNone)
	}
	v := s.view.Load()
	if v == nil || s.opts.NonAtomicClaim {
		return keep(), false
	}
	pl := s.plan(v, r, s.now())
	if !pl.plan.UsesLive() || len(pl.plan.Candidates) == 0 {
		// Nothing live to place by: the handed worker is as good as the
		// snapshot can tell.
		return keep(), false
	}
	id := s.newClaimID()
	req := s.claimRequest(id, &pl, d, nil)
	res, err := s.store.Claim(ctx, req)
	if err != nil {
		s.log.Warn("rebind a granted waiter; keeping the grant", zap.String("request_id", r.ID), zap.Error(err))
		return keep(), false
	}
	switch {
	case res.Index >= 0:
		s.giveBack(ctx, r, grant)
		c := pl.plan.Candidates[res.Index]
		d.Candidates = scoring.BreakdownLive(pl.plan.Candidates, pl.job.Prompt(), res.Active, res.Live)
		f := claimFeatures(pl.job, req.Prompt, res, res.Index, c.Worker, pl.workers)
		return s.admitted(d, r, id, c.Worker, f, c.LiveWeights.Ceiling, scoring.AdapterNone), false
	case p.bound.on && ceilingRefused(pl.plan.Candidates, res):
		s.giveBack(ctx, r, grant)
		return nil, true
	}
	return keep(), false
}

// giveBack releases a grant the waiter did not use.
func (s *Scheduler) giveBack(ctx context.Context, r Request, grant string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := s.store.Release(cctx, state.Release{ID: grant}); err != nil {
		s.log.Warn("give back a grant", zap.String("request_id", r.ID), zap.Error(err))
	}
}

// queuedAs is a waiter back in the queue under a new id.
type queuedAs struct{ id string }

// rejoin plans a requeued waiter again and claims, or queues it (queued
// set: it waits on), or refuses it.
func (s *Scheduler) rejoin(ctx context.Context, r Request, d *Decision, p *pending) (*Ticket, *queuedAs, error) {
	v := s.view.Load()
	pl := s.plan(v, r, s.now())
	if len(pl.plan.Candidates) == 0 {
		return nil, nil, s.fail(d, OutcomeNoHealthy, "no_healthy_worker",
			&RetryAfter{Err: fmt.Errorf("%s (%s): %w", r.Model, describeExcluded(pl.plan.Excluded), ErrNoHealthyWorker), After: retryAfterBusy})
	}
	id := s.newClaimID()
	req := s.claimRequest(id, &pl, d, s.queueSpec(r))
	res, err := s.store.Claim(ctx, req)
	if err != nil {
		return nil, nil, s.fail(d, OutcomeStoreFailed, "store_error", fmt.Errorf("claim for %s: %w: %w", r.Model, ErrStore, err))
	}
	p.job, p.cands = pl.job, pl.plan.Candidates
	switch {
	case res.Index >= 0:
		c := pl.plan.Candidates[res.Index]
		d.Candidates = scoring.BreakdownLive(pl.plan.Candidates, pl.job.Prompt(), res.Active, res.Live)
		f := claimFeatures(pl.job, req.Prompt, res, res.Index, c.Worker, pl.workers)
		return s.admitted(d, r, id, c.Worker, f, c.LiveWeights.Ceiling, scoring.AdapterNone), nil, nil
	case res.Queued:
		return nil, &queuedAs{id: id}, nil
	}
	return nil, nil, s.refused(d, r, pl.plan.Candidates, res)
}
