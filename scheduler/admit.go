package scheduler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/scoring/prefix"
	"github.com/llm-router/llm-router/state"
)

// Request is what the scheduler needs to know about one inference request.
type Request struct {
	ID    string // request id, for logs and explain
	Model string
	// Adapter is set by Admit when Model names a LoRA adapter: Model
	// becomes the adapter's base model, Adapter the adapter. Callers
	// leave it empty.
	Adapter      string
	PromptTokens int
	MaxTokens    int
	// Blocks are the prompt's block hashes, for prefix-aware strategies.
	Blocks   []uint64
	Stream   bool
	Priority state.Priority // "" is standard
	// Tenant is whose fair share of its priority band the request is
	// served from ("": state.DefaultTenant), weighted by
	// QueueOptions.Weights unless Unverified (named by a header no key
	// vouches for: weight 1).
	Tenant     string
	Unverified bool
	// SLO is the request's latency objectives, recorded in its decision.
	SLO SLO
	// Subset, when non-nil, restricts the pick to the workers at these
	// addresses (host:port); an empty non-nil list leaves nothing eligible.
	// The endpoint-picker protocol's subset hint arrives here.
	Subset []string
	// OnQueued, when set, is called once if the request has to wait, with
	// the longest it may wait (the ext_proc adapter extends Envoy's message
	// timeout with it).
	OnQueued func(maxWait time.Duration)

	retried bool // a second admission after an adapter load failed
}

// retryAfterBusy is the Retry-After suggested when no worker can take the
// request now.
const retryAfterBusy = time.Second

// Admit decides where r runs and claims that worker, waiting in the
// model's queue when every eligible worker is at its cap. On success the
// caller must call Ticket.Finish exactly once when the request ends (extra
// calls are harmless). A cancelled ctx (the client left) ends the wait.
func (s *Scheduler) Admit(ctx context.Context, r Request) (*Ticket, error) {
	if s.opts.Tracer == nil {
		return s.admit(ctx, r, nil)
	}
	parent := trace.SpanContextFromContext(ctx)
	if p := trace.SpanFromContext(ctx); parent.IsValid() && !p.IsRecording() {
		return s.admit(ctx, r, nil) // not sampled: see startSpan
	}
	ctx, span := s.startSpan(ctx, SpanDecide, requestAttributes(r)...)
	var d *Decision
	t, err := s.admit(ctx, r, &d)
	traceDecision(span, d, err)
	span.End()
	if t != nil {
		// The release is the request's, not the decision's: a child of
		// the caller's span when there is one.
		t.parent = parent
		if !parent.IsValid() {
			t.parent = span.SpanContext()
		}
	}
	return t, err
}

// admit is Admit; it sets *decided (when not nil) to the decision record
// as soon as there is one, so that Admit can trace it whatever the
// outcome.
func (s *Scheduler) admit(ctx context.Context, r Request, decided **Decision) (*Ticket, error) {
	start := s.now()
	r.Priority = r.Priority.OrStandard()
	v := s.view.Load()
	if v == nil {
		return nil, fmt.Errorf("no worker snapshot yet: %w", ErrStore)
	}
	asked := r // as the caller sent it, for a second admission (load.go)
	base, adapter, ok := v.resolve(r.Model)
	if !ok {
		s.obs.Rejected("", "unknown_model")
		return nil, &ModelError{Model: r.Model, Err: ErrUnknownModel}
	}
	r.Model, r.Adapter = base, adapter
	// The engine caches an adapter's blocks apart from the base's.
	r.Blocks = prefix.ForAdapter(adapter, r.Blocks)
	pl := s.plan(v, r, start)
	d := &Decision{
		RequestID: r.ID, Time: start, Replica: s.opts.ReplicaID, Model: r.Model,
		Priority: r.Priority, Tenant: r.Tenant, PromptTokens: r.PromptTokens, MaxTokens: r.MaxTokens,
		Stream: r.Stream, Strategy: pl.plan.Strategy, Fallback: pl.plan.Fallback, Excluded: pl.plan.Excluded,
		SnapshotAge: start.Sub(v.snap.At).Seconds(), SLO: r.SLO,
	}
	if r.Adapter != "" {
		d.Adapter = &AdapterDecision{Name: r.Adapter, Base: r.Model}
	}
	if decided != nil {
		*decided = d
	}
	d.LearnedCaps, d.LearnedTokenCaps = v.learnedCaps(r.Model)
	if len(pl.plan.Candidates) == 0 {
		return nil, s.fail(d, OutcomeNoHealthy, "no_healthy_worker",
			&RetryAfter{Err: fmt.Errorf("%s (%s): %w", r.Model, describeExcluded(pl.plan.Excluded), ErrNoHealthyWorker), After: retryAfterBusy})
	}

	bound := s.objectiveBound(pl.job, pl.workers)
	if bound.on && bound.wait <= s.now().Sub(start) {
		d.Prediction = &Prediction{TTFTSeconds: bound.idle.Seconds()}
		return nil, s.fail(d, OutcomeObjectiveUnmet, "slo_unattainable", &RetryAfter{
			Err:   fmt.Errorf("%s: TTFT objective %s, best idle prediction %s: %w", r.Model, pl.job.Objectives.TTFT, bound.idle, ErrObjectiveUnmet),
			After: retryAfterBusy,
		})
	}

	id := s.newClaimID()
	snapActive := snapshotActive(pl.plan.Candidates, pl.workers)
	snapPick := scoring.Pick(pl.plan.Candidates, snapActive, nil)
	var res state.ClaimResult
	var err error
	var req state.ClaimRequest
	var pair *pairClaim
	if s.opts.NonAtomicClaim {
		res, err = s.claimNonAtomic(ctx, id, pl.plan.Candidates, snapActive, snapPick)
	} else {
		req = s.claimRequest(id, &pl, d, s.queueSpec(r))
		cctx, span := s.startSpan(ctx, SpanClaim)
		res, pair, err = s.claim(cctx, &req, &pl)
		traceClaim(span, res, err)
	}
	if err != nil {
		return nil, s.fail(d, OutcomeStoreFailed, "store_error", fmt.Errorf("claim for %s: %w: %w", r.Model, ErrStore, err))
	}
	d.Candidates = scoring.BreakdownLive(pl.plan.Candidates, pl.job.Prompt(), res.Active, res.Live)
	d.Unknown = unknownTerms(pl.plan.Candidates)
	st := s.adapterClaimed(d, pl.plan.Candidates, res)
	if snapPick != res.Index && !res.Queued && res.Live == nil {
		// The live counts changed the choice the cached snapshot would have
		// made: the atomic claim at work (most often, a herd averted). With
		// affinity the snapshot knows no match, so no such comparison.
		d.Conflict = true
	}
	switch {
	case res.Index >= 0:
		c := pl.plan.Candidates[res.Index]
		f := claimFeatures(pl.job, req.Prompt, res, res.Index, c.Worker, pl.workers)
		if pair != nil {
			d.Disaggregation = pair.record(req.Prompt, s.opts.Disaggregation.MinUncached)
		}
		t := s.admitted(d, r, id, c.Worker, f, c.LiveWeights.Ceiling, st)
		if d.Disaggregation != nil && d.Disaggregation.Disaggregated {
			s.holdPrefill(t, d.Disaggregation.Worker)
		}
		return s.withAdapter(ctx, asked, t, st)
	case res.Queued:
		d.QueuePosition = res.Position
		if pair != nil {
			d.Disaggregation = &PrefillDecision{Queued: true, MinUncachedTokens: s.opts.Disaggregation.MinUncached}
		}
		p := pending{job: pl.job, cands: pl.plan.Candidates, bound: bound}
		t, err := s.wait(ctx, r, d, id, s.now(), p) // the wait counts from joining the queue
		if err != nil {
			return nil, err
		}
		return s.adapterGranted(ctx, t)
	}
	return nil, s.refused(d, r, pl.plan.Candidates, res)
}

// placement is a request's plan on the current view: the eligible workers
// in the order the plan saw them, the job and the plan.
type placement struct {
	workers []scoring.Worker
	job     scoring.Job
	plan    scoring.Plan
	// prefill are the model's prefill-only workers, left out of the plan
	// (disagg.go).
	prefill []scoring.Worker
}

// plan scores r's eligible workers of view v at now (shuffled first:
// ties in the plan go to the lower index).
func (s *Scheduler) plan(v *view, r Request, now time.Time) placement {
	workers, prefill := v.splitRoles(v.candidates(r.Model, now))
	if r.Subset != nil {
		// The gateway's subset bounds where it sends the request, the
		// decode worker; the sidecar reaches the prefill worker itself.
		workers = v.within(workers, r.Subset)
	}
	if r.Adapter != "" {
		s.withLoadTimes(workers)
		// A disaggregated prompt is prefilled with its adapter.
		prefill = slices.DeleteFunc(prefill, func(w scoring.Worker) bool { return !w.ServesAdapter(r.Adapter) })
	}
	s.opts.Shuffle(len(workers), func(i, j int) { workers[i], workers[j] = workers[j], workers[i] })
	job := scoring.Job{
		Model: r.Model, Adapter: r.Adapter, PromptTokens: r.PromptTokens, MaxTokens: r.MaxTokens, Blocks: r.Blocks,
		Objectives: scoring.Objectives{TTFT: r.SLO.TTFT.Duration(), TPOT: r.SLO.TPOT.Duration()},
	}
	plan := scoring.Build(s.strategy, scoring.Input{Job: job, Workers: workers, Cursor: s.cursor.Add(1) - 1, Now: now})
	return placement{workers: workers, job: job, plan: plan, prefill: prefill}
}

// claimRequest is the store's claim of pl's candidates under id, queueing
// by q (nil: never). It bounds the blocks looked up (pl.job's too, which
// the claim's features read).
func (s *Scheduler) claimRequest(id string, pl *placement, d *Decision, q *state.QueueSpec) state.ClaimRequest {
	req := state.ClaimRequest{ID: id, Candidates: toStateCandidates(pl.plan.Candidates), Queue: q, Adapter: pl.job.Adapter}
	if pl.plan.UsesLive() {
		if n := s.opts.MaxAffinityBlocks; n > 0 && len(pl.job.Blocks) > n {
			// A leading run: the match of a chain is a prefix. Only the
			// store's lookup is bounded; the emulations planned on all.
			pl.job.Blocks = pl.job.Blocks[:n]
		}
		req.Prompt = pl.job.Prompt()
	} else if s.opts.ClaimTokens || len(d.LearnedTokenCaps) > 0 {
		// Token limits need the request's tokens, whatever the
		// strategy: without blocks, the store looks nothing up.
		req.Prompt = scoring.Prompt{PromptTokens: pl.job.PromptTokens, DecodeTokens: pl.job.DecodeTokens()}
	}
	return req
}

// refused is the error of a claim that neither claimed nor queued.
func (s *Scheduler) refused(d *Decision, r Request, cands []scoring.Candidate, res state.ClaimResult) error {
	switch {
	case !anyTrue(res.Available):
		return s.fail(d, OutcomeNoHealthy, "no_healthy_worker",
			&RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrNoHealthyWorker), After: retryAfterBusy})
	case res.QueueFull:
		return s.fail(d, OutcomeQueueFull, "queue_full",
			&RetryAfter{Err: fmt.Errorf("%s, %s priority: %w", r.Model, r.Priority, ErrQueueFull), After: retryAfterBusy})
	case ceilingRefused(cands, res):
		return s.fail(d, OutcomeObjectiveUnmet, "slo_unattainable",
			&RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrObjectiveUnmet), After: retryAfterBusy})
	}
	return s.fail(d, OutcomeAtCapacity, "at_capacity",
		&RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrAtCapacity), After: retryAfterBusy})
}

// queueSpec says how r may queue (nil: queueing off).
func (s *Scheduler) queueSpec(r Request) *state.QueueSpec {
	q := s.opts.Queue
	if q.MaxSize <= 0 {
		return nil
	}
	allow := q.MaxSize
	switch r.Priority {
	case state.PriorityCritical:
		allow = int(math.Ceil(float64(q.MaxSize) * q.CriticalMultiplier))
	case state.PriorityBatch:
		allow = int(math.Floor(float64(q.MaxSize) * q.BatchShare))
	}
	spec := &state.QueueSpec{Model: r.Model, Priority: r.Priority.OrStandard(), Allow: allow, Replica: s.opts.ReplicaID}
	s.fairCharge(r, spec)
	return spec
}

// admitted records a claim held for r, decided on features f (ceiling:
// the claimed candidate's), and returns its ticket.
func (s *Scheduler) admitted(d *Decision, r Request, id, worker string, f latency.Features, ceiling float64, st scoring.AdapterState) *Ticket {
	d.Outcome, d.Worker = OutcomeClaimed, worker
	learn := newLearning(s.LatencyModel(worker, r.Model), f)
	d.Prediction = &Prediction{
		TTFTSeconds: learn.ttft.Value.Seconds(), TPOTSeconds: learn.tpot.Value.Seconds(),
		TTFTUnknown: learn.ttft.Unknown, TPOTUnknown: learn.tpot.Unknown, CeilingSeconds: ceiling,
	}
	if st.Loads() {
		d.Prediction.TTFTSeconds += d.Adapter.LoadSeconds
	}
	if !s.loadsAdapter(d, st) {
		s.finishDecision(d) // else once the adapter is ready (withAdapter)
	}
	t := &Ticket{s: s, ID: id, Decision: d, worker: worker, start: s.now(), learn: learn, adapterState: st}
	s.mu.Lock()
	s.live[id] = t
	s.mu.Unlock()
	if s.observer != nil {
		job := scoring.Job{Model: r.Model, PromptTokens: r.PromptTokens, MaxTokens: r.MaxTokens, Blocks: r.Blocks}
		s.observer.Claimed(id, job, worker, t.start)
	}
	return t
}

func (s *Scheduler) fail(d *Decision, outcome, reason string, err error) error {
	d.Outcome = outcome
	s.finishDecision(d)
	s.obs.Rejected(d.Model, reason)
	return err
}

func (s *Scheduler) finishDecision(d *Decision) {
	elapsed := s.now().Sub(d.Time)
	d.DecideMicros = float64((elapsed - time.Duration(d.WaitSeconds*float64(time.Second))).Microseconds())
	s.obs.Decided(d)
	if len(d.Candidates) > 0 {
		s.last.Store(d.Model, d)
	}
	logDecision(s.log, d, s.opts.LogCandidates)
	if s.opts.Recorder != nil {
		s.opts.Recorder.Record(d)
	}
}

func toStateCandidates(cs []scoring.Candidate) []state.Candidate {
	out := make([]state.Candidate, len(cs))
	for i, c := range cs {
		out[i] = state.Candidate{
			Worker: c.Worker, Cap: c.Cap, Base: c.Curve.Base, Slope: c.Curve.Slope, Mult: c.Curve.Mult,
			LiveWeights: c.LiveWeights, Adapter: c.Adapter,
		}
	}
	return out
}

func snapshotActive(cs []scoring.Candidate, ws []scoring.Worker) []int {
	byID := make(map[string]int, len(ws))
	for _, w := range ws {
		byID[w.ID] = w.Active
	}
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = byID[c.Worker]
	}
	return out
}

// unknownTerms names the terms that were unknown for at least one candidate
// (the per-candidate detail is in the breakdown).
func unknownTerms(cs []scoring.Candidate) []string {
	var out []string
	for _, c := range cs {
		for _, t := range c.Terms {
			if t.Unknown && !slices.Contains(out, t.Name) {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

func describeExcluded(ex []scoring.Excluded) string {
	parts := make([]string, len(ex))
	for i, e := range ex {
		parts[i] = e.Worker + " " + e.Reason
	}
	return strings.Join(parts, ", ")
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}
