package memory_test

import (
	"testing"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
	"github.com/llm-router/llm-router/state/storetest"
)

// TestMemoryConformance runs the store suite on the in-memory store; its
// "replicas" share one store, as goroutines of one process would.
func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(_ *testing.T, l state.Limits) state.Store { return memory.New(nil, l) }, nil)
}
