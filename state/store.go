// Package state holds the router's shared worker state: the types every
// store speaks (WorkerSpec, Worker, Snapshot, ClaimRequest, ...) and Store,
// the contract its backends implement:
//
//   - state/memory, the embedded single-replica default;
//   - state/redis, which lets any number of replicas share one state;
//   - state/failover, Redis with an in-memory fallback during its outages.
//
// One conformance suite (state/storetest) checks every backend against the
// contract below. Consumers take the role interfaces they need (Claimer,
// Queue, Fleet, ...), not the whole Store.
package state

import (
	"context"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Store is the worker-state store: every backend implements it, and every
// guarantee stated on its methods holds across all the replicas sharing one
// store, whichever backend.
type Store interface {
	Fleet
	Snapshotter
	Claimer
	PairClaimer
	Queue
	Monitor
	LimitWriter
	Latencies
}

// Fleet is the worker registry: who serves what, and whether it may take
// requests.
type Fleet interface {
	// Register adds workers and updates the static fields (the spec) of
	// known ones without touching their live state: health, drain, claims,
	// averages, learned limit.
	Register(ctx context.Context, specs []WorkerSpec) error
	// RegisterLeased registers a worker that must Heartbeat before the
	// returned expiry, or leaves the fleet. Its prefix index starts empty:
	// a worker registers as its engine starts.
	RegisterLeased(ctx context.Context, spec WorkerSpec, lease time.Duration) (time.Time, error)
	// Heartbeat extends a leased worker's lease and returns the new expiry;
	// ErrUnknownWorker for a worker that is unknown or has no lease.
	Heartbeat(ctx context.Context, id string, lease time.Duration) (time.Time, error)
	// Deregister removes a worker (ErrUnknownWorker if absent); its
	// in-flight requests end normally.
	Deregister(ctx context.Context, id string) error
	// SetHealth records a worker's health (ErrUnknownWorker if absent).
	SetHealth(ctx context.Context, worker string, health scoring.Health) error
	// SetDraining sets or clears a worker's drain flag: a draining worker
	// takes no new claim and no waiter (ErrUnknownWorker if absent).
	SetDraining(ctx context.Context, worker string, draining bool) error
}

// Snapshotter reads the whole state.
type Snapshotter interface {
	// Snapshot reads every worker's state and the queue depths, in one
	// round trip per shard.
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Claimer claims workers for requests and gives them back.
type Claimer interface {
	FirstTokener
	// Claim reads the live in-flight counts of the candidates, evaluates
	// each candidate's score curve at its live count, skips workers at
	// their cap (lowered by a learned Limit, and by its token limit when
	// the claim reads live figures), past their ceiling (a live score
	// above LiveWeights.Ceiling, as if full), draining or not healthy, and
	// the whole fleet at Limits.GlobalCap, and claims the lowest, all in
	// one atomic step. No other claim, on any replica, can interleave with it:
	// simultaneous requests never all land on the same idle worker. With
	// nothing available and req.Queue set, the request joins its model's
	// queue under req.ID instead (ClaimResult.Queued), or is refused
	// (QueueFull).
	//
	// Every claim carries a lease of Limits.Lease. The replica holding it
	// renews it while the request lives; a claim whose lease lapses (its
	// replica died) is dropped and its in-flight count and tokens given
	// back.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Release gives a claim back exactly once: releasing twice, or a claim
	// whose lease already lapsed, changes no count. It reports whether the
	// claim was still held. The same call folds the request's measurements
	// into the worker's moving averages (r.Worker receives them even when
	// the claim is gone) and hands the freed slot to the best waiter, so
	// the hot path costs two store round trips: claim and release.
	Release(ctx context.Context, r Release) (bool, error)
	// Renew extends the leases of the given claims and waiters by
	// Limits.Lease; unknown ones are ignored.
	Renew(ctx context.Context, claims, waiters []string) error
	// Move re-attributes a held claim, and the tokens it holds, to another
	// worker (Envoy retried the request there), counting a failure on the
	// old one; the cap is not checked, the request already runs there.
	// ErrUnknownClaim or ErrUnknownWorker when either is gone.
	Move(ctx context.Context, id, to string) error
}

// Queue is the cross-replica queue of requests waiting for a slot, ordered
// by priority rank, then by the tenants' fair shares (fair.go), then
// arrival. Grants happen inside the store (on
// release, on a raised limit, on Pump), so a slot goes to the best waiter
// of any replica.
type Queue interface {
	// Cancel takes a waiter out of its queue (WaiterRemoved), or says where
	// it stands if it had already left (granted: the caller holds the
	// claim and must release it).
	Cancel(ctx context.Context, id string) (WaiterStatus, error)
	// Poll says where a waiter stands: queued with its position, granted
	// with its worker, or gone (shed, or its lease lapsed).
	Poll(ctx context.Context, id string) (WaiterStatus, error)
	// Pump drops lapsed claims and waiters and hands free slots to waiters
	// of every model.
	Pump(ctx context.Context) error
	// Subscribe delivers notices about replica's waiters (granted, shed) to
	// fn until ctx ends. Delivery is at most once: waiters also Poll, so a
	// lost notice only delays a grant.
	Subscribe(ctx context.Context, replica string, fn func(Notice)) error
}

// Monitor is what the replica watching a worker (holding its monitor
// lease) writes back for every replica.
type Monitor interface {
	// AcquireMonitors takes or keeps the monitor lease (ttl) of each of
	// workers and returns those replica monitors now: each worker has at
	// most one monitor at a time.
	AcquireMonitors(ctx context.Context, replica string, workers []string, ttl time.Duration) ([]string, error)
	// ReportHealth feeds an active health check's result to the health
	// state machine (Limits.Health) and returns the worker's health after
	// it. A worker that turns unhealthy loses its prefix index.
	ReportHealth(ctx context.Context, worker string, ok bool) (scoring.Health, error)
	// PutTelemetry stores scrape results of known workers; samples not
	// measured (zero At) keep their previous value and time.
	PutTelemetry(ctx context.Context, ts map[string]Telemetry) error
	// ForgetPrefixes empties a worker's prefix index: its engine
	// restarted, and its cache with it (ErrUnknownWorker if absent).
	ForgetPrefixes(ctx context.Context, worker string) error
}

// LimitWriter keeps the learned limits (adaptive caps) every replica
// enforces.
type LimitWriter interface {
	// PutLimits stores the learned limits of known workers (unknown ones
	// are ignored, never registered) and hands slots a raised limit frees
	// to waiters at once. From then on every replica's Claim skips a worker
	// whose in-flight count reached min(cap, Limit.Value), or whose held
	// tokens would pass Limit.Tokens (see Limit.TokenRoom). Limits are soft
	// state: a worker that re-registers after leaving, or a Redis that
	// restarts empty, starts again from its configured cap.
	PutLimits(ctx context.Context, ls map[string]Limit) error
}

// Latencies keeps each worker's latency-model statistics per model
// (scoring/latency.Stats), shared by every replica: they are sums, so
// replicas add to them in any order and all fit the same model. A snapshot
// shows them in Worker.LatencyStats. Every store uses
// latency.DefaultConfig: the sums mean nothing under another.
type Latencies interface {
	// AddLatency adds each contribution to its worker's stats for its
	// model as latency.Config.Add does (rebased to the stored epoch when
	// its own differs; empty stats take the contribution's epoch), each
	// atomically; contributions for unknown workers, or of another layout
	// (sums not latency.Size long), are dropped. Stats
	// whose newest weight would pass latency's bound are first rebased to
	// the time of the add (Config.NeedsRebase), so that weights never
	// overflow. A worker that leaves the fleet (Deregister, a lapsed
	// lease) loses its stats; one whose engine restarts keeps them (the
	// same GPU: the fast fit follows any change within seconds). They are
	// soft state, like learned limits: a Redis that restarts empty
	// starts them again.
	AddLatency(ctx context.Context, cs []LatencyContribution) error
}

// FirstTokener is told when a request has its first token.
type FirstTokener interface {
	// FirstToken marks claim id's request as past its first token: its
	// uncached prompt stops counting as prefill ahead on its worker
	// (Worker.AheadTokens, scoring.Live.Ahead). Only the first call for a
	// claim counts; an unknown or released claim is ignored. Release, a
	// lapsed lease and Move keep the count right whether or not it came.
	FirstToken(ctx context.Context, id string) error
}
