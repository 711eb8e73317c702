package scheduler

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// releaseTimeout bounds the release round trip; it runs detached from the
// request's context, which is often already cancelled (client abort).
const releaseTimeout = 2 * time.Second

// Ticket is one claimed worker for one request. Finish must be called when
// the request ends, whatever ends it; it releases the claim exactly once.
type Ticket struct {
	s        *Scheduler
	ID       string
	Decision *Decision
	start    time.Time

	// learn is what the latency model learns from this request with: set
	// at the claim, never modified.
	learn learning
	// parent is the span the release span is a child of (set by Admit
	// before the ticket is handed out; invalid with tracing off).
	parent trace.SpanContext

	mu       sync.Mutex
	worker   string
	finished bool
	first    bool          // FirstToken was called
	ttft     time.Duration // as FirstToken measured it

	// adapterState is the request's adapter on its worker as the claim
	// found it; a state that loads makes its first token a sample of the
	// worker's load time (unless the router loaded it and timed the load).
	adapterState scoring.AdapterState

	// The prefill claim of a disaggregated request (disagg.go): its
	// worker and claim id, and whether it was released.
	prefill, prefillID string
	prefillDone        bool
}

// Outcome is what the response phase observed about a finished request.
type Outcome struct {
	Status           int  // HTTP status sent to the client; 0 if none
	Aborted          bool // the client or Envoy ended the stream early
	UpstreamFailure  bool // 5xx, reset or connect failure on the worker
	TTFT             time.Duration
	TokensPerSec     float64
	CompletionTokens int
}

// Worker is the worker the request currently counts against.
func (t *Ticket) Worker() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.worker
}

// Fallbacks returns up to n other workers to try, best first, should the
// claimed one fail: the decision's other candidates ranked by the same
// totals the claim compared, leaving out those that were at their cap.
// They hold no claim; when Envoy serves the request on one, Moved moves
// the claim there.
func (t *Ticket) Fallbacks(n int) []string {
	if n <= 0 || t.Decision == nil {
		return nil
	}
	worker := t.Worker()
	lines := make([]scoring.Line, 0, len(t.Decision.Candidates))
	for _, l := range t.Decision.Candidates {
		if l.Worker != worker && !l.Full {
			lines = append(lines, l)
		}
	}
	slices.SortStableFunc(lines, func(a, b scoring.Line) int { return cmp.Compare(a.Total, b.Total) })
	out := make([]string, 0, min(n, len(lines)))
	for _, l := range lines[:min(n, len(lines))] {
		out = append(out, l.Worker)
	}
	return out
}

// Moved re-attributes the claim when Envoy served the request on another
// worker (a retry after a failure). Unknown workers are ignored.
func (t *Ticket) Moved(to string) {
	t.mu.Lock()
	from := t.worker
	if to == "" || to == from || t.finished || !t.s.HasWorker(to) {
		t.mu.Unlock()
		return
	}
	t.worker = to
	t.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := t.s.store.Move(ctx, t.ID, to); err != nil {
		t.s.log.Warn("move claim", zap.String("request_id", t.Decision.RequestID), zap.String("from", from), zap.String("to", to), zap.Error(err))
	}
	t.s.obs.Moved(from, to)
}

// Finish releases the claim and records the outcome; only the first call
// has an effect.
func (t *Ticket) Finish(o Outcome) {
	t.mu.Lock()
	if t.finished {
		t.mu.Unlock()
		return
	}
	t.finished = true
	worker := t.worker
	if o.TTFT <= 0 {
		o.TTFT = t.ttft
	}
	t.mu.Unlock()

	s := t.s
	s.mu.Lock()
	delete(s.live, t.ID)
	s.mu.Unlock()

	now := s.now()
	elapsed := now.Sub(t.start)
	// The output produced settles the fair queue's charge (0: unknown).
	rel := state.Release{ID: t.ID, Alpha: s.opts.EMAAlpha, Failed: o.UpstreamFailure, OutputTokens: o.CompletionTokens}
	// Aborted requests say nothing about the worker's speed.
	if !o.Aborted && !o.UpstreamFailure {
		rel.Latency = elapsed
		rel.TTFT = o.TTFT
		rel.TokensPerSec = o.TokensPerSec
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	t.releasePrefill(ctx, false)
	ctx, span := s.releaseSpan(ctx, t.parent, worker, o, elapsed)
	if _, err := s.store.Release(ctx, rel); err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.log.Warn("release claim", zap.String("request_id", t.Decision.RequestID), zap.String("worker", worker), zap.Error(err))
	}
	span.End()
	tpot := t.learnTPOT(worker, elapsed, o, now)
	if s.observer != nil {
		s.observer.Released(t.ID, s.now())
	}
	s.obs.Finished(t.Decision, worker, elapsed, o)
	if s.opts.Recorder != nil {
		// A second record with the outcome: the first (at the decision)
		// is never modified, so readers of it need no lock.
		d := *t.Decision
		d.Result = &Result{
			Status: o.Status, ServedBy: worker, LatencySeconds: elapsed.Seconds(), TTFTSeconds: o.TTFT.Seconds(),
			TokensPerSecond: o.TokensPerSec, CompletionTokens: o.CompletionTokens, Aborted: o.Aborted,
			TPOTSeconds: tpot.Seconds(),
		}
		if worker == t.Decision.Worker {
			d.Result.TTFTError = relativeError(t.learn.ttft.Value, o.TTFT)
			d.Result.TPOTError = relativeError(t.learn.tpot.Value, tpot)
		}
		s.opts.Recorder.Record(&d)
	}
}
