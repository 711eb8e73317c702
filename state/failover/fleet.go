package failover

import (
	"context"
	"fmt"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file holds the failover store's fleet bookkeeping: health reports,
// monitor leases, telemetry and registered workers' leases, each in Redis
// or, while it is unreachable, locally.

// ReportHealth feeds a health check to Redis, or locally while degraded.
func (f *Store) ReportHealth(ctx context.Context, worker string, ok bool) (scoring.Health, error) {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.ReportHealth(ctx, worker, ok)
	}
	f.mu.Unlock()
	st, err := f.primary.ReportHealth(ctx, worker, ok)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.ReportHealth(ctx, worker, ok)
	}
	return st, err
}

// AcquireMonitors takes monitor leases in Redis; while degraded every
// replica monitors every worker (it cannot coordinate, and must not go
// blind).
func (f *Store) AcquireMonitors(ctx context.Context, replica string, workers []string, ttl time.Duration) ([]string, error) {
	if f.Degraded() {
		return workers, nil
	}
	mine, err := f.primary.AcquireMonitors(ctx, replica, workers, ttl)
	if unavailable(ctx, err) {
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
		return workers, nil
	}
	return mine, err
}

// PutTelemetry stores scrape results in Redis, or locally while degraded.
func (f *Store) PutTelemetry(ctx context.Context, ts map[string]state.Telemetry) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.PutTelemetry(ctx, ts)
	}
	f.mu.Unlock()
	err := f.primary.PutTelemetry(ctx, ts)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return f.local.PutTelemetry(ctx, ts)
	}
	return err
}

// RegisterLeased registers a leased worker in Redis, or locally while
// degraded (restored into Redis on recovery, with the lease it had).
func (f *Store) RegisterLeased(ctx context.Context, spec state.WorkerSpec, lease time.Duration) (time.Time, error) {
	// Refused in either mode: a worker registered locally while degraded
	// must fit the pools, or the recovery could not restore it.
	if err := f.primary.CheckModels(spec.Models); err != nil {
		return time.Time{}, fmt.Errorf("worker %s: %w", spec.ID, err)
	}
	return f.leaseOp(ctx, func(s state.Fleet) (time.Time, error) { return s.RegisterLeased(ctx, spec, lease) })
}

// Heartbeat extends a registered worker's lease.
func (f *Store) Heartbeat(ctx context.Context, id string, lease time.Duration) (time.Time, error) {
	return f.leaseOp(ctx, func(s state.Fleet) (time.Time, error) { return s.Heartbeat(ctx, id, lease) })
}

// Deregister removes a worker from the fleet.
func (f *Store) Deregister(ctx context.Context, id string) error {
	_, err := f.leaseOp(ctx, func(s state.Fleet) (time.Time, error) { return time.Time{}, s.Deregister(ctx, id) })
	return err
}

func (f *Store) leaseOp(ctx context.Context, op func(state.Fleet) (time.Time, error)) (time.Time, error) {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return op(f.local)
	}
	f.mu.Unlock()
	t, err := op(f.primary)
	if unavailable(ctx, err) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.degradeLocked(err)
		return op(f.local)
	}
	return t, err
}
