package failover

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// Store is the Redis store with a local fallback for Redis outages.
//
// While Redis answers, every operation goes to it. When it stops answering,
// Failover turns degraded: it seeds an in-memory store from the last
// snapshot it read (every worker, its health, drain flag, averages and
// in-flight count) plus the claims this replica holds, and routes on that
// with local accounting. Other replicas' claims stay counted as they were
// at the last snapshot, so caps err on the safe side.
//
// When Redis answers again, Failover reconciles before leaving degraded
// mode: it restores the registry and the workers' state wherever Redis has
// none (it lost its data), re-adds every claim this replica still holds that
// Redis does not count (made during the outage, or lapsed meanwhile), and
// replays the releases it made meanwhile, each releasing a claim at most
// once and feeding the averages. Nothing is double counted or lost.
//
// A failover (Sentinel promoting a replica, a Cluster replica taking over
// the slot) may lose the last writes the old master acknowledged, since
// replication is asynchronous. Failover repairs them the same way, whether
// or not this replica noticed an outage (it watches which server answers,
// see sync.go): claims it holds are re-added if missing, and
// claims it released recently (or whose claim call failed) are dropped if
// Redis still holds them.
type Store struct {
	primary *redisstore.Store
	onState func(degraded bool, err error)
	now     func() time.Time
	subs    map[string]func(state.Notice) // replica → subscriber, for the local store
	subCtx  context.Context

	mu       sync.Mutex // guards the mode and what follows; taken before liveMu
	degraded bool
	local    *memory.Store
	last     state.Snapshot
	lastOurs map[string]int // per worker, this replica's claims included in last
	pending  []state.Release
	flags    []flagChange

	serverID string // the Redis server last seen holding the keys

	// liveMu guards live and released on its own: notices from the local
	// store arrive while mu is held by the operation that caused them.
	liveMu   sync.Mutex
	live     map[string]string // claim id → worker, for this replica's claims
	released []releasedClaim   // this replica's recent releases, oldest first,
	// from releasedHead on
	releasedHead int
	onRepair     func(Repair)
}

func (f *Store) setLive(id, worker string) {
	f.liveMu.Lock()
	f.live[id] = worker
	f.liveMu.Unlock()
}

func (f *Store) takeLive(id string) (string, bool) {
	f.liveMu.Lock()
	defer f.liveMu.Unlock()
	w, ok := f.live[id]
	delete(f.live, id)
	return w, ok
}

func (f *Store) liveCopy() map[string]string {
	f.liveMu.Lock()
	defer f.liveMu.Unlock()
	return maps.Clone(f.live)
}

type flagChange struct {
	worker, what string
	health       scoring.Health
	draining     bool
}

var _ state.Store = (*Store)(nil)

// New wraps primary; onState (may be nil) is told of every change
// of mode.
func New(primary *redisstore.Store, onState func(degraded bool, err error)) *Store {
	if onState == nil {
		onState = func(bool, error) {}
	}
	return &Store{primary: primary, onState: onState, now: time.Now, live: map[string]string{}, subs: map[string]func(state.Notice){}}
}

// Degraded reports whether the store routes on local state.
func (f *Store) Degraded() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.degraded
}

// Primary returns the Redis store.
func (f *Store) Primary() *redisstore.Store { return f.primary }

// unavailable reports whether err is Redis being unreachable, not the
// caller giving up.
func unavailable(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && redisstore.IsUnavailable(err)
}

// degradeLocked switches to local accounting.
func (f *Store) degradeLocked(err error) {
	if f.degraded {
		return
	}
	f.degraded = true
	f.local = memory.New(f.now, f.primary.Limits())
	f.local.Seed(f.last, f.liveCopy(), f.lastOurs)
	for replica, fn := range f.subs {
		_ = f.local.Subscribe(f.subCtx, replica, fn)
	}
	f.onState(true, err)
}

// Run probes Redis while degraded and reconciles when it answers.
func (f *Store) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.Degraded() {
				_ = f.Recover(ctx)
			} else {
				f.CheckServer(ctx)
			}
		}
	}
}

// Recover reconciles with Redis if it answers; it is a no-op when not
// degraded.
func (f *Store) Recover(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := f.primary.Ping(pctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded {
		return nil
	}
	rctx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	localSnap, err := f.local.Snapshot(rctx)
	if err != nil {
		return err
	}
	if err := f.reconcileLocked(rctx, "outage", localSnap.Workers); err != nil {
		return err
	}
	f.degraded, f.local, f.pending, f.flags = false, nil, nil, nil
	f.onState(false, nil)
	return nil
}

// Register registers in Redis, or locally while it is unreachable (the
// workers are restored into Redis on recovery).
func (f *Store) Register(ctx context.Context, specs []state.WorkerSpec) error {
	for _, sp := range specs { // in either mode: see RegisterLeased
		if err := f.primary.CheckModels(sp.Models); err != nil {
			return fmt.Errorf("worker %s: %w", sp.ID, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded {
		err := f.primary.Register(ctx, specs)
		if !unavailable(ctx, err) {
			return err
		}
		f.degradeLocked(err)
	}
	return f.local.Register(ctx, specs)
}

// Snapshot reads Redis, or the local state while degraded.
func (f *Store) Snapshot(ctx context.Context) (state.Snapshot, error) {
	f.mu.Lock()
	degraded := f.degraded
	f.mu.Unlock()
	if !degraded {
		before := f.liveCopy()
		snap, err := f.primary.Snapshot(ctx)
		if err == nil {
			// Claims held both before and after the read were certainly in
			// it; the few that began or ended during the read are not
			// known either way and count as others'.
			ours := map[string]int{}
			for id, w := range f.liveCopy() {
				if before[id] == w {
					ours[w]++
				}
			}
			f.mu.Lock()
			f.last, f.lastOurs = snap, ours
			f.mu.Unlock()
			return snap, nil
		}
		if !unavailable(ctx, err) {
			return snap, err
		}
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded { // recovered meanwhile
		return f.last, nil
	}
	return f.local.Snapshot(ctx)
}

// Claim claims in Redis, or locally while it is unreachable.
func (f *Store) Claim(ctx context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	for attempt := 0; ; attempt++ {
		if !f.Degraded() {
			res, err := f.primary.Claim(ctx, req)
			if err == nil {
				if res.Index >= 0 {
					f.setLive(req.ID, req.Candidates[res.Index].Worker)
				}
				return res, nil
			}
			// The script may have run with its reply lost: a slot nobody
			// holds. Noted as released, a reconcile drops it (unless the
			// id turns live, claimed locally below).
			f.noteReleased(req.ID)
			if !unavailable(ctx, err) || attempt > 0 {
				return res, err
			}
			f.mu.Lock()
			f.degradeLocked(err)
			f.mu.Unlock()
		}
		f.mu.Lock()
		if f.degraded {
			res, err := f.local.Claim(ctx, req)
			if err == nil && res.Index >= 0 {
				f.setLive(req.ID, req.Candidates[res.Index].Worker)
			}
			f.mu.Unlock()
			return res, err
		}
		f.mu.Unlock() // recovered meanwhile: back to Redis
	}
}

// Release releases in Redis, or locally (queued for replay) while degraded.
func (f *Store) Release(ctx context.Context, r state.Release) (bool, error) {
	worker, mine := f.takeLive(r.ID)
	// Noted before Redis is told, so a reconcile running meanwhile that
	// re-adds the claim also drops it again.
	f.noteReleased(r.ID)
	if r.Worker == "" {
		r.Worker = worker
	}
	degraded := f.Degraded()
	if !degraded {
		ok, err := f.primary.Release(ctx, r)
		if !unavailable(context.Background(), err) {
			return ok, err
		}
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded {
		ok, err := f.primary.Release(ctx, r)
		return ok, err
	}
	// The measurements wait in pending and reach Redis once, on recovery;
	// locally only the slot is given back (the averages stay as last read).
	f.pending = append(f.pending, r)
	ok, err := f.local.Release(ctx, state.Release{ID: r.ID})
	return ok || mine, err
}

// Move re-attributes a claim in Redis, or locally while degraded.
func (f *Store) Move(ctx context.Context, id, to string) error {
	f.liveMu.Lock()
	if _, ok := f.live[id]; ok {
		f.live[id] = to
	}
	f.liveMu.Unlock()
	degraded := f.Degraded()
	if !degraded {
		err := f.primary.Move(ctx, id, to)
		if !unavailable(ctx, err) {
			return err
		}
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded {
		return f.primary.Move(ctx, id, to)
	}
	return f.local.Move(ctx, id, to)
}

// Renew extends leases in Redis, or locally while degraded (recovery
// re-adds every live claim with a fresh lease).
func (f *Store) Renew(ctx context.Context, claims, waiters []string) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.Renew(ctx, claims, waiters)
	}
	f.mu.Unlock()
	err := f.primary.Renew(ctx, claims, waiters)
	if unavailable(ctx, err) {
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
		return nil
	}
	return err
}

// SetHealth records health in Redis, or locally (replayed on recovery).
func (f *Store) SetHealth(ctx context.Context, worker string, health scoring.Health) error {
	return f.setFlag(ctx, flagChange{worker: worker, what: "health", health: health})
}

// SetDraining records the drain flag in Redis, or locally (replayed).
func (f *Store) SetDraining(ctx context.Context, worker string, draining bool) error {
	return f.setFlag(ctx, flagChange{worker: worker, what: "drain", draining: draining})
}

func (f *Store) setFlag(ctx context.Context, c flagChange) error {
	apply := func(s interface {
		SetHealth(context.Context, string, scoring.Health) error
		SetDraining(context.Context, string, bool) error
	},
	) error {
		if c.what == "health" {
			return s.SetHealth(ctx, c.worker, c.health)
		}
		return s.SetDraining(ctx, c.worker, c.draining)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.degraded {
		err := apply(f.primary)
		if !unavailable(ctx, err) {
			return err
		}
		f.degradeLocked(err)
	}
	f.flags = append(f.flags, c)
	return apply(f.local)
}

// Subscribe subscribes to Redis, and to the local store whenever the
// failover turns degraded. Grants are recorded as this replica's claims.
func (f *Store) Subscribe(ctx context.Context, replica string, fn func(state.Notice)) error {
	user := fn
	fn = func(n state.Notice) {
		if !n.Shed {
			f.setLive(n.Waiter, n.Worker)
		}
		user(n)
	}
	f.mu.Lock()
	f.subs[replica] = fn
	f.subCtx = ctx
	if f.degraded {
		_ = f.local.Subscribe(ctx, replica, fn)
	}
	f.mu.Unlock()
	// Redis may be down at start; waiters then poll until it returns.
	if err := f.primary.Subscribe(ctx, replica, fn); err != nil && !unavailable(ctx, err) {
		return err
	}
	return nil
}

// Cancel takes a waiter out of its queue, in Redis or locally.
func (f *Store) Cancel(ctx context.Context, id string) (state.WaiterStatus, error) {
	return f.waiter(ctx, id, (*redisstore.Store).Cancel, (*memory.Store).Cancel)
}

// Poll says where a waiter stands, in Redis or locally.
func (f *Store) Poll(ctx context.Context, id string) (state.WaiterStatus, error) {
	return f.waiter(ctx, id, (*redisstore.Store).Poll, (*memory.Store).Poll)
}

func (f *Store) waiter(ctx context.Context, id string,
	remote func(*redisstore.Store, context.Context, string) (state.WaiterStatus, error),
	local func(*memory.Store, context.Context, string) (state.WaiterStatus, error),
) (state.WaiterStatus, error) {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		st, err := local(f.local, ctx, id)
		if err == nil && st.State == state.WaiterGone {
			// A waiter queued in Redis before the outage: Redis knows.
			return state.WaiterStatus{State: state.WaiterQueued}, nil
		}
		return st, err
	}
	f.mu.Unlock()
	st, err := remote(f.primary, ctx, id)
	if st.State == state.WaiterGranted {
		f.setLive(id, st.Worker)
	}
	if unavailable(ctx, err) {
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
		return state.WaiterStatus{State: state.WaiterQueued}, nil
	}
	return st, err
}

// Pump hands free slots to waiters, in Redis or locally.
func (f *Store) Pump(ctx context.Context) error {
	f.mu.Lock()
	if f.degraded {
		defer f.mu.Unlock()
		return f.local.Pump(ctx)
	}
	f.mu.Unlock()
	err := f.primary.Pump(ctx)
	if unavailable(ctx, err) {
		f.mu.Lock()
		f.degradeLocked(err)
		f.mu.Unlock()
		return nil
	}
	return err
}
