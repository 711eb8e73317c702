// Package scheduler decides where each request runs. It keeps a cached view
// of the workers for scoring, asks the scoring package for a plan, and has
// the store claim the best worker atomically on live counts. It owns the
// claims it makes: their leases, their release, and the decision record.
package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// Store is the part of the state store the scheduler uses: it reads
// snapshots, claims, queues and adds latency observations; the fleet and
// the monitors are others'.
type Store interface {
	state.Snapshotter
	state.Claimer
	state.Queue
	state.Latencies
}

// QueueOptions configure admission: who waits, how long, and where.
type QueueOptions struct {
	// MaxSize is the queue cap per model (standard priority); 0 disables
	// queueing: a request finding every worker at its cap gets 429.
	MaxSize int
	// CriticalMultiplier widens critical requests' allowance (2: a queue
	// full by standard measure still takes critical requests up to 2×).
	CriticalMultiplier float64
	// BatchShare narrows batch requests' allowance (0.5: batch joins only
	// while the queue is under half full), and batch waiters are shed when
	// a higher priority finds the queue full: batch goes first.
	BatchShare float64
	// Timeouts by priority rank (state.Priority.Rank), each required
	// when MaxSize > 0; the defaults are the config's.
	Timeouts [3]time.Duration
	// PollEvery is how often a waiter checks its place in case a
	// notification was lost.
	PollEvery time.Duration
	// RequeueAfter is how long a waiter that was handed a worker, but
	// found none meeting its objectives, waits before it rejoins the
	// queue (0: DefaultRequeueAfter).
	RequeueAfter time.Duration
	// Weights are the tenants' fair shares within a band (fair.go);
	// unlisted tenants weigh 1.
	Weights map[string]float64
}

// Options configure a Scheduler.
type Options struct {
	Strategy     string
	Params       scoring.Params
	Zone, Region string
	ReplicaID    string
	Lease        time.Duration // claim lease; renewed every Lease/3
	// NonAtomicClaim claims the worker picked on the cached snapshot
	// without re-reading live counts: the herd race, for the herd
	// benchmark only.
	NonAtomicClaim  bool
	RefreshInterval time.Duration
	EMAAlpha        float64
	Logger          *zap.Logger
	// Observer is told of decisions, results and snapshots, for counting
	// (nil: nothing is counted).
	Observer Observer
	Recorder Recorder
	// LogCandidates bounds the candidates written in each decision's log
	// line (the best ones); 0 writes all.
	LogCandidates int
	Queue         QueueOptions
	// TelemetryStale bounds the age of worker-reported values (KV usage,
	// queue, GPU utilisation) used in scoring; older ones are unknown.
	TelemetryStale time.Duration
	// JoinDelay holds back a worker that appears after start (registered
	// through the admin API) this long, so that Envoy has its cluster
	// (pushed over xDS) before the first request is sent there.
	JoinDelay time.Duration
	// KVBlocks and PrefillTokensPerSecond stand in for a worker's spec
	// values when it gives none (the index bound and token-load capacity;
	// the prefix load guard's rate). 0 KVBlocks: state.DefaultKVBlocks.
	KVBlocks               int
	PrefillTokensPerSecond float64
	// MaxAffinityBlocks bounds the prompt blocks a claim looks up and
	// records (the Redis CPU per claim); 0: all the body parser kept.
	MaxAffinityBlocks int
	// ClaimTokens: every claim carries the request's tokens (prompt
	// estimate and max_tokens), whatever the strategy, so that the store
	// counts each worker's in-flight tokens for learned token limits
	// (adaptive_caps.token_limits). Strategies with the prefix or
	// token-load term carry them anyway.
	ClaimTokens bool
	Now         func() time.Time
	// Shuffle, when set, replaces the global random source that orders
	// the candidates before each plan (equal scores go to the earlier),
	// so that a caller driving the scheduler in virtual time (the fleet
	// simulator, one goroutine) gets the same decisions for the same seed.
	// Admit calls it, so it must be safe for concurrent use unless Admit
	// never runs concurrently. nil: math/rand/v2's global source.
	Shuffle func(n int, swap func(i, j int))
	// InlineLearning runs the store round trips that learning makes after
	// a first token or a finish (FirstToken, AddLatency) on the caller's
	// goroutine instead of in the background, so that a caller driving
	// the scheduler in virtual time sees them happen at the instant they
	// are due, in order, with no goroutine reading its clock. Production
	// leaves it off: the request path never waits on learning.
	InlineLearning bool
	// After, when set, replaces the wall clock's timers of the queue (a
	// waiter's timeout, poll and requeue): it runs f once d has passed on
	// the caller's clock, unless stop is called first (stop reports
	// whether it prevented f). nil: time.AfterFunc. With it and Now, a
	// caller driving the scheduler in virtual time runs the product's
	// queue with no goroutine reading the wall clock.
	After func(d time.Duration, f func()) (stop func() bool)
	// Parked, when set, is called with the request's id each time a
	// queued request has armed its timers and is about to block until a
	// notice, a timer or its context wakes it: a caller driving the
	// scheduler in virtual time runs one waiter at a time and resumes its
	// own events then. It must not block.
	Parked func(requestID string)
	// Disaggregation configures prefill/decode disaggregation, for
	// models with prefill workers (disagg.go).
	Disaggregation Disaggregation
	// Tracer makes the scheduler's spans (trace.go): the decision, the
	// claim, the wait in the queue and the release, children of the span
	// in Admit's context. nil: none, at no cost.
	Tracer trace.Tracer
	// Adapters configure LoRA adapter placement and loading (adapter.go).
	Adapters AdapterOptions
}

// Scheduler places requests on workers. It is safe for concurrent use.
type Scheduler struct {
	opts     Options
	store    Store
	strategy scoring.Strategy
	log      *zap.Logger
	obs      Observer
	now      func() time.Time

	observer ClaimObserver // the strategy, when it keeps per-replica state
	bounder  waitBounder   // the strategy, when it enforces objectives
	errors   *latency.ErrorTracker
	prior    latency.Model  // a worker's model before any snapshot has one
	bg       sync.WaitGroup // learning's store round trips under way
	loads    loadTimes      // the workers' adapter load times

	view     atomic.Pointer[view]
	cursor   atomic.Uint64
	idPrefix string
	seq      atomic.Uint64

	mu      sync.Mutex
	live    map[string]*Ticket           // claims held by this replica, for lease renewal
	waiters map[string]chan state.Notice // this replica's queued requests

	last sync.Map // model → *Decision, the latest with candidates (node_score_term)

	seenMu    sync.Mutex
	firstSeen map[string]time.Time // when each worker first appeared; nil until the first snapshot
}

// Defaults of the scheduler's settings: the config's refresh_interval and
// ema_alpha defaults read them, and New falls back to them for callers
// that set none, so each default is written once.
const (
	DefaultRefreshInterval = 100 * time.Millisecond
	DefaultEMAAlpha        = 0.2
)

// New builds a scheduler; call Refresh (or Run) before Admit.
func New(store Store, opts Options) (*Scheduler, error) {
	strategy, err := newStrategy(opts.Strategy, opts.Params)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Shuffle == nil {
		opts.Shuffle = mathrand.Shuffle
	}
	if opts.Lease <= 0 {
		opts.Lease = state.DefaultLease
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.EMAAlpha <= 0 {
		opts.EMAAlpha = DefaultEMAAlpha
	}
	if opts.Queue.MaxSize > 0 {
		// No fallback here: the defaults live in the config (one place).
		for rank, d := range opts.Queue.Timeouts {
			if d <= 0 {
				return nil, fmt.Errorf("queue timeout of rank %d is %v: every priority needs one when queueing is on", rank, d)
			}
		}
	}
	if opts.Queue.PollEvery <= 0 {
		opts.Queue.PollEvery = time.Second
	}
	if opts.Queue.RequeueAfter <= 0 {
		opts.Queue.RequeueAfter = DefaultRequeueAfter
	}
	if opts.After == nil {
		opts.After = afterFunc
	}
	if opts.Queue.CriticalMultiplier <= 0 {
		opts.Queue.CriticalMultiplier = 2
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("claim id prefix: %w", err)
	}
	s := &Scheduler{
		opts:     opts,
		store:    store,
		strategy: strategy,
		log:      opts.Logger,
		obs:      opts.Observer,
		now:      opts.Now,
		idPrefix: hex.EncodeToString(b[:]),
		live:     map[string]*Ticket{},
		waiters:  map[string]chan state.Notice{},
	}
	s.loads.prior = cmp.Or(opts.Adapters.LoadTime, DefaultAdapterLoadTime)
	s.observer, _ = strategy.(ClaimObserver)
	s.bounder, _ = strategy.(waitBounder)
	s.errors = latency.NewErrorTracker(0)
	s.prior = latency.Fit(latency.DefaultConfig(), latency.Stats{}, latency.DefaultPrior(), time.Time{})
	return s, nil
}

// Strategy names the active strategy.
func (s *Scheduler) Strategy() string { return s.strategy.Name() }

// Run listens for queue notices, refreshes the snapshot (and publishes it
// to the observer), renews leases and pumps the queues until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	s.publish(s.Snapshot())
	if err := s.Subscribe(ctx); err != nil {
		s.log.Warn("subscribe to queue notices; waiters will poll", zap.Error(err))
	}
	refresh := time.NewTicker(s.opts.RefreshInterval)
	defer refresh.Stop()
	renew := time.NewTicker(s.opts.Lease / 3)
	defer renew.Stop()
	pump := time.NewTicker(250 * time.Millisecond)
	defer pump.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			switch err := s.Refresh(ctx); {
			case err == nil:
				s.publish(s.Snapshot())
			case ctx.Err() == nil:
				s.log.Warn("refresh worker snapshot", zap.Error(err))
			}
		case <-renew.C:
			s.renew(ctx)
		case <-pump.C:
			// Slots freed where no release runs (a lapsed lease, a cap
			// raised, a worker registered) reach waiters here.
			if s.opts.Queue.MaxSize > 0 {
				_ = s.store.Pump(ctx) // a failure is counted; the next tick retries
			}
		}
	}
}

// Subscribe routes the store's queue notices about this replica's waiters
// (granted, shed) to them until ctx ends. Run calls it; a caller driving
// the scheduler without Run (the fleet simulator) calls it once.
func (s *Scheduler) Subscribe(ctx context.Context) error {
	return s.store.Subscribe(ctx, s.opts.ReplicaID, s.onNotice)
}

// onNotice routes a queue notice to the waiting request, if still here.
func (s *Scheduler) onNotice(n state.Notice) {
	s.mu.Lock()
	ch, ok := s.waiters[n.Waiter]
	s.mu.Unlock()
	if ok {
		select {
		case ch <- n:
		default:
		}
	}
}

// Refresh rereads the worker snapshot used for scoring, and does nothing
// else (Run publishes the snapshot to the observer after each).
func (s *Scheduler) Refresh(ctx context.Context) error {
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	def := fleetDefaults{kvBlocks: s.opts.KVBlocks, prefillRate: s.opts.PrefillTokensPerSecond}
	s.view.Store(newView(snap, s.opts.Zone, s.opts.Region, s.opts.TelemetryStale, s.joining(snap), def, s.opts.Adapters.Catalog, s.now()))
	return nil
}

// publish tells the observer of the snapshot, with the queue allowance of
// each priority (the same for every model).
func (s *Scheduler) publish(snap state.Snapshot) {
	var allow [3]int
	for i, p := range state.Priorities() {
		if spec := s.queueSpec(Request{Priority: p}); spec != nil {
			allow[i] = spec.Allow
		}
	}
	s.obs.Published(snap, allow)
	s.obs.PredictionErrors(s.PredictionErrors())
}

// Snapshot returns the last snapshot read (for /health and /stats).
func (s *Scheduler) Snapshot() state.Snapshot {
	if v := s.view.Load(); v != nil {
		return v.snap
	}
	return state.Snapshot{}
}

// WorkerByAddress maps an upstream address (host:port) to a worker id.
func (s *Scheduler) WorkerByAddress(addr string) (string, bool) {
	v := s.view.Load()
	if v == nil {
		return "", false
	}
	id, ok := v.byAddr[addr]
	return id, ok
}

// AddressOf returns a worker's address (host:port).
func (s *Scheduler) AddressOf(id string) (string, bool) {
	v := s.view.Load()
	if v == nil {
		return "", false
	}
	i, ok := v.index[id]
	if !ok {
		return "", false
	}
	return v.snap.Workers[i].Spec.Address, true
}

// HasWorker reports whether id is a known worker.
func (s *Scheduler) HasWorker(id string) bool {
	v := s.view.Load()
	if v == nil {
		return false
	}
	_, ok := v.index[id]
	return ok
}

// Models lists the models some known worker serves.
func (s *Scheduler) Models() []string {
	v := s.view.Load()
	if v == nil {
		return nil
	}
	return v.models
}

// LiveClaims is the number of claims this replica holds.
func (s *Scheduler) LiveClaims() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

func (s *Scheduler) renew(ctx context.Context) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	waiting := make([]string, 0, len(s.waiters))
	for id := range s.waiters {
		waiting = append(waiting, id)
	}
	s.mu.Unlock()
	if len(ids)+len(waiting) == 0 {
		return
	}
	if err := s.store.Renew(ctx, ids, waiting); err != nil {
		s.log.Warn("renew leases", zap.Int("claims", len(ids)), zap.Int("waiters", len(waiting)), zap.Error(err))
	}
}

// Waiting is the number of requests this replica has queued.
func (s *Scheduler) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}

func (s *Scheduler) newClaimID() string {
	return fmt.Sprintf("%s-%x", s.idPrefix, s.seq.Add(1))
}

// ModelTerm is one score term of a worker in the latest decision for a
// model.
type ModelTerm struct {
	Model string
	scoring.Term
}

// LastScoreTerms returns, per worker, its terms in the latest decision of
// each model it was a candidate for.
func (s *Scheduler) LastScoreTerms() map[string][]ModelTerm {
	out := map[string][]ModelTerm{}
	s.last.Range(func(_, v any) bool {
		d := v.(*Decision)
		for _, c := range d.Candidates {
			for _, t := range c.Terms {
				out[c.Worker] = append(out[c.Worker], ModelTerm{Model: d.Model, Term: t})
			}
		}
		return true
	})
	return out
}

// joining returns the workers that appeared less than JoinDelay ago. The
// workers of the first snapshot are not joining: Envoy starts only once it
// has every cluster.
func (s *Scheduler) joining(snap state.Snapshot) map[string]bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	now := s.now()
	first := s.firstSeen == nil
	if first {
		s.firstSeen = map[string]time.Time{}
	}
	out := map[string]bool{}
	present := make(map[string]bool, len(snap.Workers))
	for _, w := range snap.Workers {
		id := w.Spec.ID
		present[id] = true
		seen, ok := s.firstSeen[id]
		if !ok {
			seen = now
			if first {
				seen = time.Time{}
			}
			s.firstSeen[id] = seen
		}
		if s.opts.JoinDelay > 0 && !seen.IsZero() && now.Sub(seen) < s.opts.JoinDelay {
			out[id] = true
		}
	}
	for id := range s.firstSeen {
		if !present[id] {
			delete(s.firstSeen, id) // gone: a later return is a new join
		}
	}
	return out
}
