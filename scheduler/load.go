package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// AdapterLoader loads and unloads LoRA adapters on a worker's engine
// (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter). Its errors
// carry the engine's reason.
type AdapterLoader interface {
	Load(ctx context.Context, address string, a state.Adapter) error
	Unload(ctx context.Context, address, name string) error
}

// ErrAdapterLoad: the router could not load the request's adapter, on
// the worker it chose nor on a second one.
var ErrAdapterLoad = errors.New("adapter load failed")

// adapterWaitPoll is how often a request waiting for another request's
// load of its adapter rereads the view.
const adapterWaitPoll = 25 * time.Millisecond

// Model is the model the request runs on: the base model when it named an
// adapter (the Envoy cluster and the engine's model pool are the base's).
func (t *Ticket) Model() string {
	if t.Decision == nil {
		return ""
	}
	return t.Decision.Model
}

// adapterClaimed records the adapter's part of decision d for a claim on
// cands that returned res, and returns the winner's adapter state.
func (s *Scheduler) adapterClaimed(d *Decision, cands []scoring.Candidate, res state.ClaimResult) scoring.AdapterState {
	if d.Adapter == nil {
		return scoring.AdapterNone
	}
	scoring.AddAdapterLines(d.Candidates, cands, res.Adapter)
	if res.Index < 0 || res.Index >= len(res.Adapter) {
		return scoring.AdapterNone
	}
	st := res.Adapter[res.Index]
	d.Adapter.State, d.Adapter.Evicted = st.String(), res.Evicted
	if st.Loads() {
		d.Adapter.LoadSeconds = s.loads.seconds(cands[res.Index].Worker)
	}
	return st
}

// withAdapter finishes the admission of ticket t for r (as its caller
// asked: a second admission starts from it), whose claim found its
// adapter in state st, once the adapter is ready on t's worker: the load
// time joins the prediction; with a Loader (lora.manage), a claim that
// placed the adapter loads it (evicting what the claim evicted), and one
// that found it placed by a load still under way waits until the engine
// reports it, up to the load timeout. A failed load releases the claim
// and tries once more on the other workers, then fails with
// ErrAdapterLoad and the engine's reason.
func (s *Scheduler) withAdapter(ctx context.Context, r Request, t *Ticket, st scoring.AdapterState) (*Ticket, error) {
	d := t.Decision
	if !s.loadsAdapter(d, st) {
		return t, nil
	}
	defer s.finishDecision(d)
	loader := s.opts.Adapters.Loader
	timeout := s.opts.Adapters.LoadTimeout
	if timeout <= 0 {
		timeout = DefaultAdapterLoadTimeout
	}
	addr, _ := s.AddressOf(t.worker)
	if !st.Loads() {
		s.awaitAdapter(ctx, r, d, t.worker, timeout)
		return t, nil
	}
	a := state.Adapter{Name: d.Adapter.Name, Base: d.Model}
	var evict state.Adapter
	if v := s.view.Load(); v != nil {
		if i, ok := v.index[t.worker]; ok && v.snap.Workers[i].Telemetry.Adapters.Holds(a.Name) {
			// Registered there (--lora-modules, or an earlier load): the
			// engine moves it into a slot itself on first use.
			return t, nil
		}
		if c, ok := v.adapters.catalog[a.Name]; ok {
			a = c
		}
		evict = v.adapters.catalog[d.Adapter.Evicted]
	}
	if r.OnQueued != nil {
		r.OnQueued(timeout) // Envoy must wait for the load
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if evict.Path != "" {
		// Only an adapter the router can load again: one the engine
		// serves from its own start (no path known) stays registered.
		if err := loader.Unload(lctx, addr, evict.Name); err != nil {
			s.log.Warn("unload adapter", zap.String("worker", t.worker), zap.String("adapter", d.Adapter.Evicted), zap.Error(err))
		}
	}
	start := s.now()
	err := loader.Load(lctx, addr, a)
	took := s.now().Sub(start)
	load := AdapterLoad{Worker: t.worker, Seconds: took.Seconds()}
	if err == nil {
		// Measured directly: the first token after it says nothing more.
		s.loads.observe(t.worker, took, s.now())
		t.adapterState = scoring.AdapterActive
		d.Adapter.Loads = append(d.Adapter.Loads, load)
		s.logAdapter(d, load)
		return t, nil
	}
	load.Error = err.Error()
	d.Adapter.Loads = append(d.Adapter.Loads, load)
	s.logAdapter(d, load)
	// The claim goes back; its placement stays idle until the engine's
	// next report, which does not hold the adapter, drops it.
	t.Finish(Outcome{Aborted: true})
	if r.retried || ctx.Err() != nil {
		return nil, fmt.Errorf("%s on %s: %w: %w", d.Adapter.Name, t.worker, ErrAdapterLoad, err)
	}
	r2 := r
	r2.retried = true
	r2.Subset = s.otherAddresses(d, t.worker)
	t2, err2 := s.admit(ctx, r2, nil)
	if err2 != nil && errors.Is(err2, ErrNoHealthyWorker) {
		return nil, fmt.Errorf("%s on %s, no other worker: %w: %w", d.Adapter.Name, t.worker, ErrAdapterLoad, err)
	}
	return t2, err2
}

// loadsAdapter reports whether d's adapter, found in state st by the
// claim, goes through the loader before the request is routed (its
// decision is finished then). A grant from the queue (AdapterNone) does
// not.
func (s *Scheduler) loadsAdapter(d *Decision, st scoring.AdapterState) bool {
	return d.Adapter != nil && st != scoring.AdapterNone && s.opts.Adapters.Loader != nil
}

// otherAddresses are the addresses of d's candidates but worker.
func (s *Scheduler) otherAddresses(d *Decision, worker string) []string {
	out := []string{}
	for _, c := range d.Candidates {
		if c.Worker == worker {
			continue
		}
		if addr, ok := s.AddressOf(c.Worker); ok {
			out = append(out, addr)
		}
	}
	return out
}

// awaitAdapter waits, up to timeout, until worker's engine reports d's
// adapter; it returns at once when the engine reports no adapters at all
// (it cannot say) or already holds it, and when a snapshot taken after
// the wait began no longer has the adapter placed there (the load failed
// and the engine's report dropped the placement: the engine answers).
func (s *Scheduler) awaitAdapter(ctx context.Context, r Request, d *Decision, worker string, timeout time.Duration) {
	start := s.now()
	waiting := false
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(adapterWaitPoll)
	defer tick.Stop()
	for {
		v := s.view.Load()
		if v == nil {
			return
		}
		i, ok := v.index[worker]
		if !ok {
			return
		}
		w := v.snap.Workers[i]
		rep := w.Telemetry.Adapters
		gone := v.snap.At.After(start) && !slices.ContainsFunc(w.Adapters, func(p state.AdapterPlacement) bool { return p.Name == d.Adapter.Name })
		if !rep.Known() || rep.Holds(d.Adapter.Name) || gone {
			if waiting {
				d.Adapter.Waited = s.now().Sub(start).Seconds()
			}
			return
		}
		if !waiting && r.OnQueued != nil {
			r.OnQueued(timeout) // Envoy must wait for the load
		}
		waiting = true
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			d.Adapter.Waited = s.now().Sub(start).Seconds()
			return
		case <-tick.C:
		}
	}
}

func (s *Scheduler) logAdapter(d *Decision, l AdapterLoad) {
	f := []zap.Field{zap.String("request_id", d.RequestID), zap.String("adapter", d.Adapter.Name), zap.String("worker", l.Worker), zap.Float64("seconds", l.Seconds)}
	if l.Error != "" {
		s.log.Warn("adapter load failed", append(f, zap.String("error", l.Error))...)
		return
	}
	s.log.Info("adapter loaded", f...)
}

// adapterGranted readies the adapter of a request the queue handed worker
// t.worker: the grant placed nothing (the store's grant does not know the
// adapter), so with a Loader, when neither a claim placed the adapter
// there nor its engine lists it, the router loads it there, when the
// catalog gives its path. A failed
// load releases the claim: ErrAdapterLoad with the engine's reason. The
// decision is already recorded: the load goes to the log only.
func (s *Scheduler) adapterGranted(ctx context.Context, t *Ticket) (*Ticket, error) {
	if t == nil || t.Decision == nil || t.Decision.Adapter == nil || s.opts.Adapters.Loader == nil {
		return t, nil
	}
	d := t.Decision
	worker := t.Worker()
	v := s.view.Load()
	if v == nil {
		return t, nil
	}
	i, ok := v.index[worker]
	a, known := v.adapters.catalog[d.Adapter.Name]
	if !ok || !known || a.Path == "" {
		return t, nil
	}
	w := v.snap.Workers[i]
	placed := slices.ContainsFunc(w.Adapters, func(p state.AdapterPlacement) bool { return p.Name == a.Name })
	if placed || w.Telemetry.Adapters.Holds(a.Name) {
		return t, nil
	}
	timeout := cmp.Or(s.opts.Adapters.LoadTimeout, DefaultAdapterLoadTimeout)
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := w.Spec.Address
	start := s.now()
	err := s.opts.Adapters.Loader.Load(lctx, addr, a)
	load := AdapterLoad{Worker: worker, Seconds: s.now().Sub(start).Seconds()}
	if err != nil {
		load.Error = err.Error()
		s.logAdapter(d, load)
		t.Finish(Outcome{Aborted: true})
		return nil, fmt.Errorf("%s on %s after the queue: %w: %w", a.Name, worker, ErrAdapterLoad, err)
	}
	s.loads.observe(worker, s.now().Sub(start), s.now())
	s.logAdapter(d, load)
	return t, nil
}
