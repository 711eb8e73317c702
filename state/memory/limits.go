package memory

import (
	"context"
	"fmt"

	"github.com/llm-router/llm-router/state"
)

// PutLimits stores learned limits of known workers (unknown ones are
// ignored) and hands slots a raised limit frees to
// waiters.
func (m *Store) PutLimits(_ context.Context, ls map[string]state.Limit) error {
	m.lock()
	defer m.unlock()
	now := m.now()
	for id, l := range ls {
		w, ok := m.workers[id]
		if !ok {
			continue
		}
		w.Limit = l
		m.pumpWorker(id, now)
	}
	return nil
}

// ForgetPrefixes empties a worker's prefix index: its engine restarted,
// and its cache with it.
func (m *Store) ForgetPrefixes(_ context.Context, worker string) error {
	m.lock()
	defer m.unlock()
	w, ok := m.workers[worker]
	if !ok {
		return fmt.Errorf("%s: %w", worker, state.ErrUnknownWorker)
	}
	w.index = nil
	return nil
}
