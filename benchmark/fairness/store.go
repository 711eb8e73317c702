package fairness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// storeDispatcher is llm-router's queue: the in-memory store shared by
// the replicas, on the run's virtual clock. fair false sends every
// request as the one default tenant: first come, first served.
type storeDispatcher struct {
	x       *run
	store   *memory.Store
	cands   []state.Candidate
	fair    bool
	byID    map[string]*request
	granted []state.Notice
}

var _ dispatcher = (*storeDispatcher)(nil)

func newStoreDispatcher(x *run, fair bool) (*storeDispatcher, error) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &storeDispatcher{x: x, fair: fair, byID: map[string]*request{}}
	// Leases far past the run: nothing lapses in virtual time. Counters
	// decay as the product's default has them.
	d.store = memory.New(func() time.Time { return epoch.Add(x.now) },
		state.Limits{Lease: 1000 * time.Hour, FairHalfLife: config.DefaultFairDecay.D()})
	ctx := context.Background()
	var specs []state.WorkerSpec
	for i := range x.sc.Workers {
		id := "w" + strconv.Itoa(i)
		specs = append(specs, state.WorkerSpec{ID: id, Address: fmt.Sprintf("10.9.0.%d:8000", i), Models: []string{"m"}, MaxConcurrency: x.sc.Cap})
		d.cands = append(d.cands, state.Candidate{Worker: id, Cap: x.sc.Cap, Slope: 1})
	}
	if err := d.store.Register(ctx, specs); err != nil {
		return nil, err
	}
	for r := range replicas {
		// Notices arrive after the store's lock is released, still inside
		// the call: d.flush handles them once it returns.
		if err := d.store.Subscribe(ctx, "r"+strconv.Itoa(r), func(n state.Notice) { d.granted = append(d.granted, n) }); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *storeDispatcher) arrive(r *request) {
	id := strconv.Itoa(r.id)
	d.byID[id] = r
	t := d.x.sc.Tenants[r.tenant]
	q := &state.QueueSpec{Model: "m", Priority: state.PriorityStandard, Allow: 1 << 30, Replica: "r" + strconv.Itoa(r.replica)}
	if d.fair {
		q.Tenant, q.Cost = t.Name, state.FairCost(r.in, r.out, t.weight())
	}
	res, err := d.store.Claim(context.Background(), state.ClaimRequest{ID: id, Candidates: d.cands, Queue: q})
	if err != nil {
		panic(fmt.Sprintf("memory store claim: %v", err)) // the store fails only on a duplicate id
	}
	if res.Index >= 0 {
		d.x.start(r, res.Index)
	}
	d.flush()
}

func (d *storeDispatcher) done(r *request) {
	if _, err := d.store.Release(context.Background(), state.Release{ID: strconv.Itoa(r.id)}); err != nil {
		panic(fmt.Sprintf("memory store release: %v", err))
	}
	d.flush()
}

// flush starts the waiters the store granted.
func (d *storeDispatcher) flush() {
	for len(d.granted) > 0 {
		n := d.granted[0]
		d.granted = d.granted[1:]
		r := d.byID[n.Waiter]
		if n.Shed || r == nil {
			continue
		}
		w, _ := strconv.Atoi(n.Worker[1:])
		d.x.start(r, w)
	}
}
