package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Store is the embedded store: all state in this process, guarded by one
// mutex, so every operation is atomic with respect to every other. It is
// the default when no Redis is configured (a single replica), and the
// local fallback of Failover. Its semantics are the Redis scripts'; one
// conformance suite checks both.
type Store struct {
	now    func() time.Time
	limits state.Limits

	mu        sync.Mutex
	workers   map[string]*memWorker
	order     []string // registration order, for stable snapshots
	claims    map[string]*memClaim
	total     int // claims held, all workers
	queues    map[string][]*memWaiter
	waiters   map[string]*memWaiter
	grants    map[string]string
	seq       int64
	nextPurge time.Time
	notify    map[string]func(state.Notice)
	outbox    []outgoing // notices to deliver once the lock is released
	monitors  map[string]monitorLease
	fair      fairQueues
}

var _ state.Store = (*Store)(nil)

type memWorker struct {
	state.Worker
	afail, pfail, asucc int
	since               time.Time
	index               *lruIndex // prefix index; nil until a claim records one
}

type memClaim struct {
	worker  string
	expiry  time.Time
	tok     claimTokens
	adapter string // the LoRA adapter it placed ("": none)
}

type outgoing struct {
	replica string
	n       state.Notice
}

// New returns an empty in-memory store. now may be nil (time.Now).
func New(now func() time.Time, l state.Limits) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{
		now: now, limits: l.WithDefaults(),
		workers: map[string]*memWorker{}, claims: map[string]*memClaim{},
		queues: map[string][]*memWaiter{}, waiters: map[string]*memWaiter{}, grants: map[string]string{},
		notify: map[string]func(state.Notice){}, monitors: map[string]monitorLease{},
	}
}

// lock takes the mutex; unlock releases it and then delivers the notices
// the operation produced, so a subscriber may call back into the store.
func (m *Store) lock() { m.mu.Lock() }

func (m *Store) unlock() {
	out := m.outbox
	m.outbox = nil
	fns := make([]func(state.Notice), len(out))
	for i, o := range out {
		fns[i] = m.notify[o.replica]
	}
	m.mu.Unlock()
	for i, o := range out {
		if fns[i] != nil {
			fns[i](o.n)
		}
	}
}

// Subscribe delivers notices about replica's waiters to fn, until ctx ends.
func (m *Store) Subscribe(ctx context.Context, replica string, fn func(state.Notice)) error {
	m.mu.Lock()
	m.notify[replica] = fn
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		delete(m.notify, replica)
		m.mu.Unlock()
	}()
	return nil
}

// Register adds workers and updates the static fields of known ones without
// touching their live state (health, drain, claims, averages).
func (m *Store) Register(_ context.Context, specs []state.WorkerSpec) error {
	m.lock()
	defer m.unlock()
	now := m.now()
	for _, s := range specs {
		s.Models = slices.Clone(s.Models)
		if w, ok := m.workers[s.ID]; ok {
			w.Spec = s
		} else {
			m.workers[s.ID] = &memWorker{Worker: state.Worker{Spec: s, Health: scoring.Healthy}}
			m.order = append(m.order, s.ID)
		}
		m.pumpWorker(s.ID, now)
	}
	return nil
}

// Snapshot copies every worker's state and the queue depths.
func (m *Store) Snapshot(_ context.Context) (state.Snapshot, error) {
	m.lock()
	defer m.unlock()
	now := m.now()
	m.purge(now, false)
	out := state.Snapshot{At: now, Workers: make([]state.Worker, 0, len(m.order))}
	for _, id := range m.order {
		mw := m.workers[id]
		w := mw.Worker
		w.Spec.Models = slices.Clone(w.Spec.Models)
		// LatencyStats are shared, not copied: AddLatency replaces a
		// worker's map and sums, never writes into them.
		w.Adapters = sortedPlacements(w.Adapters)
		if mw.index != nil {
			w.PrefixBlocks = state.IndexStride * mw.index.len()
		}
		out.Workers = append(out.Workers, w)
	}
	for model, q := range m.queues {
		if len(q) == 0 {
			continue
		}
		d := state.QueueDepth{Model: model}
		for _, w := range q {
			switch w.priority {
			case state.PriorityCritical:
				d.Critical++
			case state.PriorityStandard:
				d.Standard++
			default:
				d.Batch++
			}
		}
		out.Queues = append(out.Queues, d)
	}
	slices.SortFunc(out.Queues, func(a, b state.QueueDepth) int { return strings.Compare(a.Model, b.Model) })
	return out, nil
}

// Claim picks and claims atomically, or queues (see claim.lua).
func (m *Store) Claim(_ context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	m.lock()
	defer m.unlock()
	return m.claimLocked(req, nil)
}

// claimLocked is Claim under the lock; pair, when set, is told of the
// decode claim as soon as it is held (ClaimPair).
func (m *Store) claimLocked(req state.ClaimRequest, pair *pairPick) (state.ClaimResult, error) {
	now := m.now()
	m.purge(now, false)
	if _, dup := m.claims[req.ID]; dup {
		return state.ClaimResult{}, fmt.Errorf("claim %q already held", req.ID)
	}
	if _, dup := m.waiters[req.ID]; dup {
		return state.ClaimResult{}, fmt.Errorf("claim %q already held", req.ID)
	}
	ahead := false
	if q := req.Queue; q != nil {
		m.pumpModel(q.Model, now)
		if wq := m.queues[q.Model]; len(wq) > 0 && wq[0].priority.Rank() <= q.Priority.Rank() {
			ahead = true
		}
	}
	res := state.ClaimResult{Index: -1, Active: make([]int, len(req.Candidates)), Available: make([]bool, len(req.Candidates))}
	aff := req.ReadsLive()
	if aff {
		res.Live = make([]scoring.Live, len(req.Candidates))
	}
	if req.Adapter != "" {
		res.Adapter = make([]scoring.AdapterState, len(req.Candidates))
	}
	// Two passes: the curves and, with a prompt, each candidate's bounds
	// (scoring.LiveBounds); then the matches of those that can win.
	// An eval with no worker is a candidate not evaluated.
	type eval struct {
		w         *memWorker
		score, lo float64
	}
	evals := make([]eval, len(req.Candidates))
	minHi := math.Inf(1)
	for i, c := range req.Candidates {
		w, ok := m.workers[c.Worker]
		if !ok {
			continue
		}
		res.Active[i] = w.InFlight
		res.Available[i] = w.available()
		if !res.Available[i] || w.full(c.Cap) {
			continue
		}
		e := eval{w: w, score: c.Score(w.InFlight)}
		if req.Adapter != "" {
			// The adapter's price does not depend on the match: a part
			// of the curve for the bounds below.
			res.Adapter[i] = adapterState(w, c, req.Adapter)
			e.score += scoring.AdapterScore(c.Adapter, res.Adapter[i])
		}
		if aff {
			// A learned token limit or the ceiling: a candidate that
			// cannot take the request even with a full match is out; one
			// that can only with some match does not bound the others (its
			// hi is not sure to be reachable).
			full := state.FullMatch(req.Prompt)
			if !w.tokenRoom(req.Prompt.Need(full)) {
				res.Live[i] = w.load() // its load says why
				continue
			}
			lo, hi := scoring.LiveBounds(c.LiveWeights, req.Prompt, full, w.load())
			fullOver, noneOver := c.LiveWeights.OverBounds(req.Prompt, full, w.load())
			if fullOver {
				res.Live[i] = w.load()
				continue
			}
			e.lo = e.score + lo
			if w.tokenRoom(req.Prompt.Need(0)) && !noneOver {
				minHi = min(minHi, e.score+hi)
			}
		}
		evals[i] = e
	}
	best, bestScore := -1, 0.0
	for i, c := range req.Candidates {
		e := evals[i]
		if e.w == nil {
			continue
		}
		s := e.score
		if aff {
			if e.lo > minHi {
				res.Live[i] = e.w.load()
				res.Live[i].Unread = true
				continue
			}
			res.Live[i] = e.w.live(req.Prompt.Blocks)
			if !e.w.tokenRoom(req.Prompt.Need(res.Live[i].Match)) {
				continue
			}
			if c.LiveWeights.Over(req.Prompt, res.Live[i]) {
				continue
			}
			s += scoring.LiveScore(c.LiveWeights, req.Prompt, res.Live[i])
		}
		if best < 0 || s < bestScore {
			best, bestScore = i, s
		}
	}
	if best >= 0 && !ahead && m.globalRoom() {
		res.Index = best
		c := req.Candidates[best]
		var tok claimTokens
		if aff {
			u := req.Prompt.Uncached(res.Live[best].Match)
			tok = claimTokens{prefill: u, decode: req.Prompt.DecodeTokens, ahead: u}
			m.workers[c.Worker].recordBlocks(req.Prompt.Blocks, c.IndexBound())
			m.workers[c.Worker].PredictedHitTokens += req.Prompt.PredictedHits(res.Live[best].Match)
		}
		m.hold(req.ID, c.Worker, now, tok)
		res.Evicted = m.placeAdapter(req.ID, req.Adapter, m.workers[c.Worker], c, now)
		if pair != nil {
			pair.decide(m, req, res, best, now)
		}
		if q := req.Queue; q != nil {
			m.fairCharge(req.ID, fairOf(q), now)
		}
		return res, nil
	}
	q := req.Queue
	if q == nil {
		return res, nil
	}
	if len(m.queues[q.Model]) >= q.Allow && q.Priority != state.PriorityBatch {
		m.shedNewestBatch(q.Model)
	}
	if len(m.queues[q.Model]) >= q.Allow {
		res.QueueFull = true
		return res, nil
	}
	m.seq++
	res.Queued, res.Position = true, m.enqueue(&memWaiter{
		id: req.ID, model: q.Model, replica: q.Replica, priority: q.Priority.OrStandard(), seq: m.seq, expiry: now.Add(m.limits.Lease),
		tok:  claimTokens{prefill: req.Prompt.PromptTokens, decode: req.Prompt.DecodeTokens, ahead: req.Prompt.PromptTokens},
		fair: fairOf(q),
	}, now)
	return res, nil
}

// available: healthy or recovering (half-open), and not draining.
func (w *memWorker) available() bool {
	return (w.Health == scoring.Healthy || w.Health == scoring.Recovering) && !w.Draining
}

// capFor is the worker's cap in force given configured cap c, its health
// and its learned limit (0: none, as for c): a recovering worker takes one
// request at a time (a probe).
func (w *memWorker) capFor(c int) int {
	c = state.CapWith(c, w.Limit.Value)
	if w.Health == scoring.Recovering {
		return 1 // whatever the cap, or with none
	}
	return c
}

// full reports whether the worker is at the cap in force for configured
// cap c.
func (w *memWorker) full(c int) bool {
	c = w.capFor(c)
	return c > 0 && w.InFlight >= c
}

func (w *memWorker) free() bool {
	return w.available() && !w.full(w.Spec.MaxConcurrency)
}

// Release gives the claim back once, folds the measurements into the
// worker's averages and hands the slot to the best waiter. It reports
// whether the claim was still held.
func (m *Store) Release(_ context.Context, r state.Release) (bool, error) {
	m.lock()
	defer m.unlock()
	now := m.now()
	m.fairSettle(r, now)
	worker, held := m.unhold(r.ID)
	if !held {
		worker = r.Worker
	}
	w, ok := m.workers[worker]
	if !ok {
		return held, nil
	}
	w.Stats = observe(w.Stats, r, now)
	m.healthEvent(w, !r.Failed, true, now)
	if held {
		m.pumpWorker(worker, now)
	}
	return held, nil
}

// observe applies a release's measurements to a worker's stats.
func observe(s state.Stats, r state.Release, now time.Time) state.Stats {
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
func (m *Store) Move(_ context.Context, id, to string) error {
	m.lock()
	defer m.unlock()
	c, ok := m.claims[id]
	if !ok {
		return state.ErrUnknownClaim
	}
	dst, ok := m.workers[to]
	if !ok {
		return fmt.Errorf("move claim to %q: %w", to, state.ErrUnknownWorker)
	}
	if c.worker == to {
		return nil
	}
	from := c.worker
	now := m.now()
	if src, ok := m.workers[from]; ok {
		src.InFlight = max(0, src.InFlight-1)
		src.addTokens(c.tok, -1)
		// Envoy moved the request because it failed there.
		src.Stats.Errors++
		m.healthEvent(src, false, true, now)
	}
	dst.InFlight++
	dst.addTokens(c.tok, 1)
	m.moveAdapter(c, dst, now)
	c.worker = to
	m.pumpWorker(from, now)
	return nil
}

// Renew extends the leases of the given claims and waiters; unknown ones
// are ignored.
func (m *Store) Renew(_ context.Context, claims, waiters []string) error {
	m.lock()
	defer m.unlock()
	exp := m.now().Add(m.limits.Lease)
	for _, id := range claims {
		if c, ok := m.claims[id]; ok {
			c.expiry = exp
		}
	}
	for _, id := range waiters {
		if w, ok := m.waiters[id]; ok {
			w.expiry = exp
		}
	}
	return nil
}

// SetHealth records a worker's health.
func (m *Store) SetHealth(_ context.Context, worker string, health scoring.Health) error {
	return m.update(worker, func(w *memWorker) { w.Health = health })
}

// SetDraining sets or clears a worker's drain flag.
func (m *Store) SetDraining(_ context.Context, worker string, draining bool) error {
	return m.update(worker, func(w *memWorker) { w.Draining = draining })
}

func (m *Store) update(worker string, f func(*memWorker)) error {
	m.lock()
	defer m.unlock()
	w, ok := m.workers[worker]
	if !ok {
		return fmt.Errorf("%q: %w", worker, state.ErrUnknownWorker)
	}
	before := w.Health
	f(w)
	if w.Health != before {
		w.since, w.afail, w.pfail, w.asucc = m.now(), 0, 0, 0
		if w.Health == scoring.Unhealthy {
			w.index = nil // it may restart with an empty cache
		}
	}
	m.pumpWorker(worker, m.now())
	return nil
}

// purge drops lapsed claims and waiters, at most every 50 ms unless forced.
func (m *Store) purge(now time.Time, force bool) {
	if !force && now.Before(m.nextPurge) {
		return
	}
	m.nextPurge = now.Add(50 * time.Millisecond)
	freed := map[string]bool{}
	for id, c := range m.claims {
		if now.After(c.expiry) {
			if w, ok := m.unhold(id); ok {
				freed[w] = true
			}
		}
	}
	for id, w := range m.waiters {
		if now.After(w.expiry) {
			m.dropWaiter(id)
		}
	}
	for _, id := range slices.Clone(m.order) {
		if w := m.workers[id]; w.Registered && now.After(w.LeaseExpires) {
			m.deregisterLocked(id)
		}
	}
	for w := range freed {
		m.pumpWorker(w, now)
	}
}
