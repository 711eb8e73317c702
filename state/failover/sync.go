package failover

import (
	"context"
	"errors"
	"time"

	"github.com/llm-router/llm-router/state"
)

// This file holds the failover store's reconcile, how it notices a
// failover it did not see as an outage, and what it remembers to repair
// lost writes.

// Repair reports one reconcile: why it ran and what it fixed.
type Repair struct {
	// Reason is "outage" (Redis was unreachable) or "failover" (another
	// server answers now: restarted, or a replica promoted).
	Reason string
	// Added counts this replica's claims Redis lacked (made while it was
	// unreachable, lapsed meanwhile, or lost by a failover), now counted.
	Added int
	// Dropped counts claims this replica had released whose release Redis
	// had lost, now released.
	Dropped int
}

// OnRepair sets fn (may be nil) to be told of every reconcile.
func (f *Store) OnRepair(fn func(Repair)) {
	f.liveMu.Lock()
	f.onRepair = fn
	f.liveMu.Unlock()
}

func (f *Store) repaired(r Repair) {
	f.liveMu.Lock()
	fn := f.onRepair
	f.liveMu.Unlock()
	if fn != nil {
		fn(r)
	}
}

type releasedClaim struct {
	id string
	at time.Time
}

// maxReleased bounds the memory of recent releases (tens of seconds of a
// busy replica's releases).
const maxReleased = 1 << 17

// releaseMemory is how long a release is remembered: a release Redis lost
// leaves a claim nobody renews, which lapses on its own within a lease,
// so two leases cover it with room for the failover itself.
func (f *Store) releaseMemory() time.Duration { return 2 * f.primary.Limits().Lease }

func (f *Store) noteReleased(id string) {
	now := f.now()
	f.liveMu.Lock()
	defer f.liveMu.Unlock()
	f.released = append(f.released, releasedClaim{id: id, at: now})
	h := f.releasedHead
	for h < len(f.released) && (len(f.released)-h > maxReleased || now.Sub(f.released[h].at) > f.releaseMemory()) {
		f.released[h] = releasedClaim{}
		h++
	}
	// Forgotten entries are dropped from the front in bulk, so each release
	// costs O(1) amortised on the hot path.
	if h > 1024 && h > len(f.released)/2 {
		n := copy(f.released, f.released[h:])
		clear(f.released[n:])
		f.released, h = f.released[:n], 0
	}
	f.releasedHead = h
}

// recentReleases lists the claims this replica released, or whose claim
// failed, in the last releaseMemory: none of them may be held in Redis.
func (f *Store) recentReleases() []string {
	now := f.now()
	f.liveMu.Lock()
	defer f.liveMu.Unlock()
	out := make([]string, 0, len(f.released)-f.releasedHead)
	for _, r := range f.released[f.releasedHead:] {
		// A live id is held, whatever happened to it before.
		if _, held := f.live[r.id]; !held && now.Sub(r.at) <= f.releaseMemory() {
			out = append(out, r.id)
		}
	}
	return out
}

// CheckServer asks which server holds the keys; when it changed without
// this replica seeing an outage (a quick failover, or one while it was
// idle), it reconciles as after an outage. An unreachable Redis turns the
// store degraded, as any failed operation would. Run calls it on every tick.
func (f *Store) CheckServer(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	id, err := f.primary.ServerID(cctx)
	if err != nil {
		if unavailable(cctx, err) {
			f.mu.Lock()
			f.degradeLocked(err)
			f.mu.Unlock()
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.degraded || id == f.serverID {
		return
	}
	if f.serverID == "" { // the first look: nothing to compare with
		f.serverID = id
		return
	}
	rctx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	_ = f.reconcileLocked(rctx, "failover", f.last.Workers)
}

// reconcileLocked puts back what Redis may lack: the workers (registry and
// live state), this replica's claims, its recent releases and, after an
// outage, what it did meanwhile.
func (f *Store) reconcileLocked(ctx context.Context, reason string, workers []state.Worker) error {
	if err := f.primary.Restore(ctx, workers); err != nil {
		return err
	}
	added, err := f.primary.Adopt(ctx, f.liveCopy())
	if err != nil {
		return err
	}
	for _, r := range f.pending {
		if _, err := f.primary.Release(ctx, r); err != nil {
			return err
		}
	}
	f.pending = nil // replayed: never twice, even if a later step fails
	// After the replay, a released claim Redis still holds is one whose
	// release Redis acknowledged and then lost.
	dropped, err := f.primary.Forget(ctx, f.recentReleases())
	if err != nil {
		return err
	}
	for _, c := range f.flags {
		var err error
		if c.what == "health" {
			err = f.primary.SetHealth(ctx, c.worker, c.health)
		} else {
			err = f.primary.SetDraining(ctx, c.worker, c.draining)
		}
		if err != nil && !errors.Is(err, state.ErrUnknownWorker) {
			return err
		}
	}
	if id, err := f.primary.ServerID(ctx); err == nil {
		f.serverID = id
	}
	f.repaired(Repair{Reason: reason, Added: added, Dropped: dropped})
	return nil
}
