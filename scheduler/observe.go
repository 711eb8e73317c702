package scheduler

import (
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// Observer is told what the scheduler decides and sees, so that it can be
// counted; internal/metrics implements it for Prometheus and internal/app
// wires it. A nil Options.Observer counts nothing. Calls come from many
// goroutines at once and must not block. Store round trips are not
// reported here: wrap the Store given to New to count them.
type Observer interface {
	// Decided: a decision reached its outcome, a claim (after any wait in
	// the queue: then QueuePosition > 0) or a refusal.
	Decided(d *Decision)
	// Rejected: the scheduler answered a request with an error of its own,
	// for reason (queue_full, shed, unknown_model, ...). model is empty
	// when it is none the scheduler knows (it came from the client).
	Rejected(model, reason string)
	// Finished: a claimed request ended on worker, elapsed after its claim.
	Finished(d *Decision, worker string, elapsed time.Duration, o Outcome)
	// Moved: Envoy served a claimed request on to rather than on from.
	Moved(from, to string)
	// Published: Run read a new worker snapshot. queueAllow is how many
	// requests of each priority rank one model's queue admits (0:
	// queueing off).
	Published(snap state.Snapshot, queueAllow [3]int)
	// PredictionErrors: the latency model's errors over this replica's
	// last predictions (TTFT and TPOT of the claimed workers), after each
	// Published.
	PredictionErrors(ttft, tpot latency.ErrorSummary)
}

// noObserver counts nothing.
type noObserver struct{}

var _ Observer = noObserver{}

func (noObserver) Decided(*Decision)                                  {}
func (noObserver) Rejected(string, string)                            {}
func (noObserver) Finished(*Decision, string, time.Duration, Outcome) {}
func (noObserver) Moved(string, string)                               {}
func (noObserver) Published(state.Snapshot, [3]int)                   {}
func (noObserver) PredictionErrors(_, _ latency.ErrorSummary)         {}
