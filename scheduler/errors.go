package scheduler

import (
	"errors"
	"strconv"
	"time"
)

// Sentinel kinds of scheduling failure. The ext_proc boundary maps each to
// an HTTP status; detect them with errors.Is.
var (
	// ErrUnknownModel: no worker is configured for the model.
	ErrUnknownModel = errors.New("model not found")
	// ErrNoHealthyWorker: workers serve the model, but none is healthy and
	// undrained.
	ErrNoHealthyWorker = errors.New("no healthy worker for model")
	// ErrAtCapacity: every eligible worker is at its max_concurrency.
	ErrAtCapacity = errors.New("every worker for the model is at capacity")
	// ErrStore: the state store failed and no local fallback applied.
	ErrStore = errors.New("state store unavailable")
	// ErrQueueFull: every eligible worker is at its cap and the model's
	// queue has no room for the request's priority.
	ErrQueueFull = errors.New("the queue for the model is full")
	// ErrShed: a queued batch request gave its place to a higher priority.
	ErrShed = errors.New("shed from the queue for higher-priority requests")
	// ErrQueueTimeout: the request waited its priority's queue timeout.
	ErrQueueTimeout = errors.New("timed out waiting for a worker")
	// ErrObjectiveUnmet: no worker can take the request within its
	// latency objectives, and waiting longer could not meet its TTFT
	// objective any more (the predicted strategy).
	ErrObjectiveUnmet = errors.New("no worker can meet the request's latency objectives")
)

// RetryAfter is attached to errors that should tell the client when to
// come back.
type RetryAfter struct {
	Err   error
	After time.Duration
}

func (e *RetryAfter) Error() string { return e.Err.Error() }

// Unwrap exposes the kind.
func (e *RetryAfter) Unwrap() error { return e.Err }

// RetryAfterOf returns the suggested delay carried by err, or 0.
func RetryAfterOf(err error) time.Duration {
	var ra *RetryAfter
	if errors.As(err, &ra) {
		return ra.After
	}
	return 0
}

// ModelError names the model a scheduling error is about.
type ModelError struct {
	Model string
	Err   error
}

func (e *ModelError) Error() string { return "model " + strconv.Quote(e.Model) + ": " + e.Err.Error() }

// Unwrap exposes the kind.
func (e *ModelError) Unwrap() error { return e.Err }
