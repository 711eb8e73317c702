package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file holds the in-memory store's fleet bookkeeping: registered
// workers' leases, the health state machine, monitor leases and scraped
// telemetry.

func (m *Store) deregisterLocked(id string) bool {
	if _, ok := m.workers[id]; !ok {
		return false
	}
	delete(m.workers, id)
	delete(m.monitors, id)
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
	return true
}

// RegisterLeased registers a worker that must heartbeat within lease.
func (m *Store) RegisterLeased(ctx context.Context, spec state.WorkerSpec, lease time.Duration) (time.Time, error) {
	if err := m.Register(ctx, []state.WorkerSpec{spec}); err != nil {
		return time.Time{}, err
	}
	return m.Heartbeat(ctx, spec.ID, -lease)
}

// Heartbeat extends a registered worker's lease (a negative lease starts
// one: RegisterLeased).
func (m *Store) Heartbeat(_ context.Context, id string, lease time.Duration) (time.Time, error) {
	m.lock()
	defer m.unlock()
	w, ok := m.workers[id]
	switch {
	case !ok:
		return time.Time{}, fmt.Errorf("%q: %w", id, state.ErrUnknownWorker)
	case lease >= 0 && !w.Registered:
		return time.Time{}, fmt.Errorf("%w: not registered through the API (it has no lease)", state.ErrUnknownWorker)
	}
	if lease < 0 {
		lease = -lease
		w.index = nil // a worker registers as it starts: its cache is empty
	}
	w.Registered, w.LeaseExpires = true, m.now().Add(lease)
	return w.LeaseExpires, nil
}

// Deregister removes a worker from the fleet; its in-flight requests end
// normally.
func (m *Store) Deregister(_ context.Context, id string) error {
	m.lock()
	defer m.unlock()
	if !m.deregisterLocked(id) {
		return fmt.Errorf("%q: %w", id, state.ErrUnknownWorker)
	}
	return nil
}

type monitorLease struct {
	holder string
	expiry time.Time
}

// healthEvent is the health state machine (see health_event in
// lua/prelude.lua and HealthPolicy).
func (m *Store) healthEvent(w *memWorker, ok, passive bool, now time.Time) scoring.Health {
	p := m.limits.Health
	cur := w.Health
	next := cur
	if ok {
		if passive {
			w.pfail = 0
		} else {
			w.afail = 0
			w.asucc++
		}
		switch {
		case cur == scoring.Unhealthy && !passive && now.Sub(w.since) >= p.HoldDown:
			next, w.asucc = scoring.Recovering, 1
		case cur == scoring.Recovering && (passive || w.asucc >= 2):
			next = scoring.Healthy
		}
	} else {
		w.asucc = 0
		if passive {
			w.pfail++
		} else {
			w.afail++
		}
		if cur == scoring.Recovering || (cur == scoring.Healthy && (w.afail >= p.ActiveFailures || w.pfail >= p.PassiveFailures)) {
			next = scoring.Unhealthy
		}
	}
	if next != cur {
		w.Health, w.since = next, now
		if next == scoring.Unhealthy {
			w.index = nil // it may restart with an empty cache
		}
		if next != scoring.Unhealthy {
			w.afail, w.pfail = 0, 0
			m.pumpWorker(w.Spec.ID, now)
		}
	}
	return next
}

// ReportHealth feeds an active health check's result to the state machine.
func (m *Store) ReportHealth(_ context.Context, worker string, ok bool) (scoring.Health, error) {
	m.lock()
	defer m.unlock()
	w, found := m.workers[worker]
	if !found {
		return "", fmt.Errorf("%q: %w", worker, state.ErrUnknownWorker)
	}
	return m.healthEvent(w, ok, false, m.now()), nil
}

// AcquireMonitors takes or keeps the monitor lease of each worker.
func (m *Store) AcquireMonitors(_ context.Context, replica string, workers []string, ttl time.Duration) ([]string, error) {
	m.lock()
	defer m.unlock()
	now := m.now()
	var mine []string
	for _, id := range workers {
		l, held := m.monitors[id]
		if !held || l.holder == replica || now.After(l.expiry) {
			m.monitors[id] = monitorLease{holder: replica, expiry: now.Add(ttl)}
			mine = append(mine, id)
		}
	}
	return mine, nil
}

// PutTelemetry stores scrape results; samples not measured keep their
// previous value and time.
func (m *Store) PutTelemetry(_ context.Context, ts map[string]state.Telemetry) error {
	m.lock()
	defer m.unlock()
	for id, t := range ts {
		w, ok := m.workers[id]
		if !ok {
			continue
		}
		old := w.Telemetry
		keep := func(n, o state.Sample) state.Sample {
			if n.At.IsZero() {
				return o
			}
			return n
		}
		w.Telemetry = state.Telemetry{
			KVUsage: keep(t.KVUsage, old.KVUsage), Waiting: keep(t.Waiting, old.Waiting),
			Running: keep(t.Running, old.Running), GPUUtil: keep(t.GPUUtil, old.GPUUtil),
			PrefixHits: keep(t.PrefixHits, old.PrefixHits), KVBlocks: keep(t.KVBlocks, old.KVBlocks),
			StartTime: keep(t.StartTime, old.StartTime), HitMark: keep(t.HitMark, old.HitMark),
			PredictedMark: keep(t.PredictedMark, old.PredictedMark), HitRatio: keep(t.HitRatio, old.HitRatio),
			GapMark: keep(t.GapMark, old.GapMark), SlowMark: keep(t.SlowMark, old.SlowMark),
			SlowShare: keep(t.SlowShare, old.SlowShare), At: t.At, By: t.By, Error: t.Error,
			Adapters: old.Adapters,
		}
		if t.Adapters.Known() {
			w.Telemetry.Adapters = t.Adapters
			w.Adapters = state.SyncAdapters(w.Adapters, t.Adapters)
		}
	}
	return nil
}
