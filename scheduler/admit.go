package scheduler

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Request is what the scheduler needs to know about one inference request.
type Request struct {
	ID           string // request id, for logs and explain
	Model        string
	PromptTokens int
	MaxTokens    int
	Stream       bool
	Priority     string
	Tenant       string
}

// retryAfterBusy is the Retry-After suggested when no worker can take the
// request now.
const retryAfterBusy = time.Second

// Admit decides where r runs and claims that worker. On success the caller
// must call Ticket.Finish exactly once when the request ends (extra calls
// are harmless).
func (s *Scheduler) Admit(ctx context.Context, r Request) (*Ticket, error) {
	start := s.now()
	v := s.view.Load()
	if v == nil {
		return nil, fmt.Errorf("no worker snapshot yet: %w", ErrStore)
	}
	if _, ok := v.byModel[r.Model]; !ok {
		s.reject(r, "unknown_model")
		return nil, &ModelError{Model: r.Model, Err: ErrUnknownModel}
	}

	workers := v.candidates(r.Model, start)
	// Random order: ties in the plan go to the lower index.
	rand.Shuffle(len(workers), func(i, j int) { workers[i], workers[j] = workers[j], workers[i] })
	job := scoring.Job{Model: r.Model, PromptTokens: r.PromptTokens, MaxTokens: r.MaxTokens}
	plan := scoring.Build(s.strategy, scoring.Input{Job: job, Workers: workers, Cursor: s.cursor.Add(1) - 1})

	d := &Decision{
		RequestID: r.ID, Time: start, Replica: s.opts.ReplicaID, Model: r.Model,
		Priority: r.Priority, Tenant: r.Tenant, PromptTokens: r.PromptTokens, MaxTokens: r.MaxTokens,
		Stream: r.Stream, Strategy: plan.Strategy, Fallback: plan.Fallback, Excluded: plan.Excluded,
		SnapshotAge: start.Sub(v.snap.At).Seconds(),
	}
	if len(plan.Candidates) == 0 {
		return nil, s.fail(d, OutcomeNoHealthy, "no_healthy_worker",
			&RetryAfter{Err: fmt.Errorf("%s (%s): %w", r.Model, describeExcluded(plan.Excluded), ErrNoHealthyWorker), After: retryAfterBusy})
	}

	id := s.newClaimID()
	snapActive := snapshotActive(plan.Candidates, workers)
	snapPick := scoring.Pick(plan.Candidates, snapActive, nil)
	var res state.ClaimResult
	var err error
	if s.opts.NonAtomicClaim {
		res, err = s.claimNonAtomic(ctx, id, plan.Candidates, snapActive, snapPick)
	} else {
		s.m.StoreRoundTrips.WithLabelValues("claim").Inc()
		res, err = s.store.Claim(ctx, state.ClaimRequest{ID: id, Candidates: toStateCandidates(plan.Candidates), Lease: s.opts.Lease})
	}
	if err != nil {
		s.m.StoreErrors.WithLabelValues("claim").Inc()
		return nil, s.fail(d, OutcomeStoreFailed, "store_error", fmt.Errorf("claim for %s: %w: %w", r.Model, ErrStore, err))
	}
	d.Candidates = scoring.Breakdown(plan.Candidates, res.Active)
	d.Unknown = unknownTerms(plan.Candidates)
	if snapPick != res.Index {
		// The live counts changed the choice the cached snapshot would have
		// made: the atomic claim at work (most often, a herd averted).
		d.Conflict = true
		s.m.ClaimConflicts.Inc()
	}
	if res.Index < 0 {
		if !anyTrue(res.Available) {
			return nil, s.fail(d, OutcomeNoHealthy, "no_healthy_worker",
				&RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrNoHealthyWorker), After: retryAfterBusy})
		}
		return nil, s.fail(d, OutcomeAtCapacity, "at_capacity",
			&RetryAfter{Err: fmt.Errorf("%s: %w", r.Model, ErrAtCapacity), After: retryAfterBusy})
	}

	worker := plan.Candidates[res.Index].Worker
	d.Outcome, d.Worker = OutcomeClaimed, worker
	s.finishDecision(d)

	t := &Ticket{s: s, ID: id, Decision: d, model: r.Model, worker: worker, start: start, promptTokens: r.PromptTokens}
	s.mu.Lock()
	s.live[id] = t
	s.mu.Unlock()
	return t, nil
}

func (s *Scheduler) fail(d *Decision, outcome, reason string, err error) error {
	d.Outcome = outcome
	s.finishDecision(d)
	s.m.RequestsRejected.WithLabelValues(d.Model, reason).Inc()
	return err
}

func (s *Scheduler) reject(r Request, reason string) {
	s.m.RequestsRejected.WithLabelValues("", reason).Inc()
}

func (s *Scheduler) finishDecision(d *Decision) {
	elapsed := s.now().Sub(d.Time)
	d.DecideMicros = float64(elapsed.Microseconds())
	s.m.DecisionDuration.WithLabelValues(d.Strategy).Observe(elapsed.Seconds())
	s.m.Picks.WithLabelValues(d.Strategy, d.Outcome).Inc()
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
		out[i] = state.Candidate{Worker: c.Worker, Cap: c.Cap, Base: c.Curve.Base, Slope: c.Curve.Slope, Mult: c.Curve.Mult}
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

// claimNonAtomic is the read-then-write claim every naive router does: it
// takes the worker the cached snapshot ranks best and claims it with no cap
// check against live counts. Only for the herd benchmark.
func (s *Scheduler) claimNonAtomic(ctx context.Context, id string, cands []scoring.Candidate, snapActive []int, pick int) (state.ClaimResult, error) {
	res := state.ClaimResult{Index: -1, Active: snapActive, Available: make([]bool, len(cands))}
	for i := range res.Available {
		res.Available[i] = true
	}
	if pick < 0 {
		return res, nil
	}
	one := toStateCandidates(cands[pick : pick+1])
	one[0].Cap = math.MaxInt32
	s.m.StoreRoundTrips.WithLabelValues("claim").Inc()
	r, err := s.store.Claim(ctx, state.ClaimRequest{ID: id, Candidates: one, Lease: s.opts.Lease})
	if err != nil || r.Index < 0 {
		return res, err
	}
	res.Index = pick
	return res, nil
}
