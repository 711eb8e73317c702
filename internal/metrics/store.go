package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// countedStore is the scheduler's store with every round trip counted in
// one place (llm_router_store_round_trips_total and, for the failed ones,
// llm_router_store_errors_total, by operation), rather than by hand at each
// call site. A call whose own context was cancelled (the client left, the
// process stops) is a round trip but not a store error.
type countedStore struct {
	scheduler.Store
	snapshot, claim, release, renew, move, cancel, poll, pump opCounters
	firstToken, addLatency                                    opCounters
}

var _ scheduler.Store = (*countedStore)(nil)

// opCounters are one operation's two counters, resolved once.
type opCounters struct{ trips, errs prometheus.Counter }

func (o opCounters) count(ctx context.Context, err error) {
	o.trips.Inc()
	if err != nil && ctx.Err() == nil {
		o.errs.Inc()
	}
}

// CountStore wraps the scheduler's store so that its round trips are
// counted on m (internal/app gives the scheduler the wrapped store).
func (m *Metrics) CountStore(s scheduler.Store) scheduler.Store {
	op := func(name string) opCounters {
		return opCounters{m.StoreRoundTrips.WithLabelValues(name), m.StoreErrors.WithLabelValues(name)}
	}
	return &countedStore{
		Store:    s,
		snapshot: op("snapshot"), claim: op("claim"), release: op("release"), renew: op("renew"),
		move: op("move"), cancel: op("cancel"), poll: op("poll"), pump: op("pump"),
		firstToken: op("first_token"), addLatency: op("add_latency"),
	}
}

func (c *countedStore) Snapshot(ctx context.Context) (state.Snapshot, error) {
	snap, err := c.Store.Snapshot(ctx)
	c.snapshot.count(ctx, err)
	return snap, err
}

func (c *countedStore) Claim(ctx context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	res, err := c.Store.Claim(ctx, req)
	c.claim.count(ctx, err)
	return res, err
}

func (c *countedStore) Release(ctx context.Context, r state.Release) (bool, error) {
	ok, err := c.Store.Release(ctx, r)
	c.release.count(ctx, err)
	return ok, err
}

func (c *countedStore) Renew(ctx context.Context, claims, waiters []string) error {
	err := c.Store.Renew(ctx, claims, waiters)
	c.renew.count(ctx, err)
	return err
}

func (c *countedStore) Move(ctx context.Context, id, to string) error {
	err := c.Store.Move(ctx, id, to)
	c.move.count(ctx, err)
	return err
}

func (c *countedStore) FirstToken(ctx context.Context, id string) error {
	err := c.Store.FirstToken(ctx, id)
	c.firstToken.count(ctx, err)
	return err
}

func (c *countedStore) AddLatency(ctx context.Context, cs []state.LatencyContribution) error {
	err := c.Store.AddLatency(ctx, cs)
	c.addLatency.count(ctx, err)
	return err
}

func (c *countedStore) Cancel(ctx context.Context, id string) (state.WaiterStatus, error) {
	st, err := c.Store.Cancel(ctx, id)
	c.cancel.count(ctx, err)
	return st, err
}

func (c *countedStore) Poll(ctx context.Context, id string) (state.WaiterStatus, error) {
	st, err := c.Store.Poll(ctx, id)
	c.poll.count(ctx, err)
	return st, err
}

func (c *countedStore) Pump(ctx context.Context) error {
	err := c.Store.Pump(ctx)
	c.pump.count(ctx, err)
	return err
}
