package state

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is the embedded store: all state in this process, guarded by one
// mutex, so every operation is atomic with respect to every other. It is
// the default when no Redis is configured (a single replica).
type Memory struct {
	now func() time.Time

	mu        sync.Mutex
	workers   map[string]*memWorker
	order     []string // registration order, for stable snapshots
	claims    map[string]*memClaim
	nextPurge time.Time
}

type memWorker struct {
	Worker
}

type memClaim struct {
	worker string
	expiry time.Time
}

// NewMemory returns an empty in-memory store. now may be nil (time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, workers: map[string]*memWorker{}, claims: map[string]*memClaim{}}
}

// Register adds workers and updates the static fields of known ones without
// touching their live state (health, drain, claims, averages).
func (m *Memory) Register(_ context.Context, specs []WorkerSpec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range specs {
		s.Models = slices.Clone(s.Models)
		if w, ok := m.workers[s.ID]; ok {
			w.Spec = s
			continue
		}
		m.workers[s.ID] = &memWorker{Worker: Worker{Spec: s, Health: Healthy}}
		m.order = append(m.order, s.ID)
	}
	return nil
}

// Snapshot copies every worker's state.
func (m *Memory) Snapshot(_ context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.purgeLocked(now, false)
	out := Snapshot{At: now, Workers: make([]Worker, 0, len(m.order))}
	for _, id := range m.order {
		w := m.workers[id].Worker
		w.Spec.Models = slices.Clone(w.Spec.Models)
		out.Workers = append(out.Workers, w)
	}
	return out, nil
}

// Claim picks and claims atomically (see the package doc).
func (m *Memory) Claim(_ context.Context, req ClaimRequest) (ClaimResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.purgeLocked(now, false)
	if _, dup := m.claims[req.ID]; dup {
		return ClaimResult{}, fmt.Errorf("claim %q already held", req.ID)
	}
	res := ClaimResult{Index: -1, Active: make([]int, len(req.Candidates)), Available: make([]bool, len(req.Candidates))}
	best := 0.0
	for i, c := range req.Candidates {
		w, ok := m.workers[c.Worker]
		if !ok {
			continue
		}
		res.Active[i] = w.InFlight
		res.Available[i] = w.Health == Healthy && !w.Draining
		if !res.Available[i] || w.InFlight >= c.Cap {
			continue
		}
		if s := c.Score(w.InFlight); res.Index < 0 || s < best {
			res.Index, best = i, s
		}
	}
	if res.Index >= 0 {
		id := req.Candidates[res.Index].Worker
		m.workers[id].InFlight++
		m.claims[req.ID] = &memClaim{worker: id, expiry: now.Add(req.Lease)}
	}
	return res, nil
}

// Release gives the claim back once and folds the measurements into the
// worker's averages. It reports whether the claim was still held.
func (m *Memory) Release(_ context.Context, r Release) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c, held := m.claims[r.ID]
	worker := r.Worker
	if held {
		delete(m.claims, r.ID)
		worker = c.worker
	}
	w, ok := m.workers[worker]
	if !ok {
		return held, nil
	}
	if held {
		w.InFlight--
	}
	w.Stats = observe(w.Stats, r, now)
	return held, nil
}

// observe applies a release's measurements to a worker's stats.
func observe(s Stats, r Release, now time.Time) Stats {
	s.Requests++
	if r.Failed {
		s.Errors++
		return s
	}
	if r.Latency > 0 {
		s.Latency = s.Latency.Observe(r.Latency.Seconds(), r.Alpha, now)
	}
	if r.TTFT > 0 {
		s.TTFT = s.TTFT.Observe(r.TTFT.Seconds(), r.Alpha, now)
	}
	if r.TokensPerSec > 0 {
		s.TokensPerSec = s.TokensPerSec.Observe(r.TokensPerSec, r.Alpha, now)
	}
	return s
}

// Move re-attributes a held claim to another worker (Envoy retried the
// request elsewhere). The cap is not checked: the request already runs there.
func (m *Memory) Move(_ context.Context, id, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[id]
	if !ok {
		return ErrUnknownClaim
	}
	dst, ok := m.workers[to]
	if !ok {
		return fmt.Errorf("move claim to %q: %w", to, ErrUnknownWorker)
	}
	if c.worker == to {
		return nil
	}
	if src, ok := m.workers[c.worker]; ok {
		src.InFlight--
	}
	dst.InFlight++
	c.worker = to
	return nil
}

// Renew extends the leases of the given claims; unknown ones are ignored.
func (m *Memory) Renew(_ context.Context, ids []string, lease time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	exp := m.now().Add(lease)
	for _, id := range ids {
		if c, ok := m.claims[id]; ok {
			c.expiry = exp
		}
	}
	return nil
}

// SetHealth records a worker's health.
func (m *Memory) SetHealth(_ context.Context, worker, health string) error {
	return m.update(worker, func(w *memWorker) { w.Health = health })
}

// SetDraining sets or clears a worker's drain flag.
func (m *Memory) SetDraining(_ context.Context, worker string, draining bool) error {
	return m.update(worker, func(w *memWorker) { w.Draining = draining })
}

func (m *Memory) update(worker string, f func(*memWorker)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[worker]
	if !ok {
		return fmt.Errorf("%q: %w", worker, ErrUnknownWorker)
	}
	f(w)
	return nil
}

// purgeLocked drops lapsed claims, at most every 50 ms unless forced.
func (m *Memory) purgeLocked(now time.Time, force bool) {
	if !force && now.Before(m.nextPurge) {
		return
	}
	m.nextPurge = now.Add(50 * time.Millisecond)
	for id, c := range m.claims {
		if now.After(c.expiry) {
			delete(m.claims, id)
			if w, ok := m.workers[c.worker]; ok {
				w.InFlight--
			}
		}
	}
}

// seed replaces the store's content with a snapshot taken from another
// store and registers claims (id → worker) as held here. Each worker's count
// becomes the others' claims as of the snapshot (its count minus
// oursAtSnap, the claims of ours the snapshot included) plus ours now.
func (m *Memory) seed(snap Snapshot, claims map[string]string, oursAtSnap map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.workers, m.order, m.claims = map[string]*memWorker{}, nil, map[string]*memClaim{}
	for _, w := range snap.Workers {
		w.Spec.Models = slices.Clone(w.Spec.Models)
		w.InFlight = max(0, w.InFlight-oursAtSnap[w.Spec.ID])
		m.workers[w.Spec.ID] = &memWorker{Worker: w}
		m.order = append(m.order, w.Spec.ID)
	}
	far := m.now().Add(100 * 365 * 24 * time.Hour)
	for id, w := range claims {
		m.claims[id] = &memClaim{worker: w, expiry: far}
		if mw, ok := m.workers[w]; ok {
			mw.InFlight++
		}
	}
}
