package failover

import (
	"context"

	"github.com/llm-router/llm-router/state"
)

// PutLimits stores learned limits in Redis, or locally while degraded.
func (f *Store) PutLimits(ctx context.Context, ls map[string]state.Limit) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.PutLimits(ctx, ls)
	}
	f.mu.Unlock()
	err := f.primary.PutLimits(ctx, ls)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.PutLimits(ctx, ls)
	}
	return err
}

// AddLatency adds latency statistics in Redis, or locally while degraded.
// What is added locally stays local: it is not replayed on recovery, since
// the statistics are soft state that the fast fit relearns within seconds
// of traffic, and a replay would need the outage's every contribution.
func (f *Store) AddLatency(ctx context.Context, cs []state.LatencyContribution) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.AddLatency(ctx, cs)
	}
	f.mu.Unlock()
	err := f.primary.AddLatency(ctx, cs)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.AddLatency(ctx, cs)
	}
	return err
}

// FirstToken marks a claim past its first token in Redis, or locally
// while degraded (a claim the local store does not hold is ignored, as
// everywhere: seeded claims carry no tokens).
func (f *Store) FirstToken(ctx context.Context, id string) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.FirstToken(ctx, id)
	}
	f.mu.Unlock()
	err := f.primary.FirstToken(ctx, id)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.FirstToken(ctx, id)
	}
	return err
}

// ForgetPrefixes empties a worker's prefix index in Redis, or locally
// while degraded.
func (f *Store) ForgetPrefixes(ctx context.Context, worker string) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.ForgetPrefixes(ctx, worker)
	}
	f.mu.Unlock()
	err := f.primary.ForgetPrefixes(ctx, worker)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.ForgetPrefixes(ctx, worker)
	}
	return err
}
