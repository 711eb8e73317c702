package decisions

import (
	"context"

	"github.com/llm-router/llm-router/scheduler"
)

// Explainer finds the decision made for a request id: this replica's ring
// first, then the shared stream (another replica decided).
type Explainer struct {
	ring   *Ring
	stream *Stream // nil without Redis: this replica's decisions only
}

// NewExplainer reads ring, then stream when it is not nil.
func NewExplainer(ring *Ring, stream *Stream) *Explainer {
	return &Explainer{ring: ring, stream: stream}
}

// Explain returns the decision for requestID, or an error wrapping
// ErrNotFound when none is kept.
func (e *Explainer) Explain(ctx context.Context, requestID string) (*scheduler.Decision, error) {
	if d, ok := e.ring.Get(requestID); ok {
		return d, nil
	}
	if e.stream == nil {
		return nil, ErrNotFound
	}
	return e.stream.Get(ctx, requestID)
}
