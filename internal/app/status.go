package app

import (
	"sync/atomic"

	"github.com/llm-router/llm-router/internal/admin"
	"github.com/llm-router/llm-router/internal/decisions"
)

// replicaStatus is this replica's own condition, as /health and the admin
// API report it.
type replicaStatus struct {
	draining atomic.Bool
	degraded func() bool // the shared store is unreachable
	auth     string
}

var (
	_ admin.Status    = (*replicaStatus)(nil)
	_ admin.Explainer = (*decisions.Explainer)(nil)
)

// Status is "draining" (shutting down), "degraded" (routing on local state)
// or "ok".
func (s *replicaStatus) Status() string {
	switch {
	case s.draining.Load():
		return "draining"
	case s.degraded():
		return "degraded"
	}
	return "ok"
}

// Auth describes the API-key auth state.
func (s *replicaStatus) Auth() string { return s.auth }
