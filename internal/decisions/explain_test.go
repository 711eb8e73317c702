package decisions

import (
	"context"
	"errors"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
)

func TestExplainerReadsTheRingWithoutAStream(t *testing.T) {
	ring := NewRing(4)
	ring.Record(&scheduler.Decision{RequestID: "kept", Model: "m"})
	e := NewExplainer(ring, nil)
	if d, err := e.Explain(context.Background(), "kept"); err != nil || d.Model != "m" {
		t.Fatalf("kept: %v %v", d, err)
	}
	if _, err := e.Explain(context.Background(), "other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
