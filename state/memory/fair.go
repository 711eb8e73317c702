package memory

import (
	"time"

	"github.com/llm-router/llm-router/state"
)

// This file holds the in-memory store's fair queuing within a priority
// band (see state/fair.go): per model and band, each backlogged tenant's
// waiters in arrival order, and per model and tenant a virtual token
// counter. The Redis scripts' fair_* functions (prelude.lua) do the same.

// fairBand is one priority band of one model's queue.
type fairBand struct {
	model string
	rank  int
}

// fairKey names a tenant's counter in one model's queue.
type fairKey struct{ model, tenant string }

// fairCounter is a counter's value as of at (ms since the epoch).
type fairCounter struct {
	v  float64
	at int64
}

// fairQueues is the fair-queue state; its zero value is empty.
type fairQueues struct {
	bands    map[fairBand]map[string][]*memWaiter // tenant → waiters, oldest first
	counters map[fairKey]fairCounter
	held     map[string]fairHeld // by claim id, while held: what a release may give back
}

// fairHeld is what a held claim's tenant was charged for output.
type fairHeld struct {
	key           fairKey
	chargedOutput int
	outputCost    float64
}

// fairInit makes the maps on first use.
func (m *Store) fairInit() {
	if m.fair.bands == nil {
		m.fair.bands = map[fairBand]map[string][]*memWaiter{}
		m.fair.counters = map[fairKey]fairCounter{}
		m.fair.held = map[string]fairHeld{}
	}
}

func (m *Store) fairValue(model, tenant string, now int64) float64 {
	c := m.fair.counters[fairKey{model, tenant}]
	return state.FairDecay(c.v, c.at, now, m.limits.FairHalfLife.Milliseconds())
}

// fairJoin adds a new waiter to its band, lifting its tenant to the least
// counter among the band's backlogged tenants if it had no waiter there.
func (m *Store) fairJoin(w *memWaiter, now time.Time) {
	m.fairInit()
	b := fairBand{w.model, w.priority.Rank()}
	tenants := m.fair.bands[b]
	if tenants == nil {
		tenants = map[string][]*memWaiter{}
		m.fair.bands[b] = tenants
	}
	if len(tenants[w.fair.tenant]) == 0 {
		ms := now.UnixMilli()
		least, any := 0.0, false
		for t := range tenants {
			if v := m.fairValue(w.model, t, ms); !any || state.FairLess(v, least) {
				least, any = v, true
			}
		}
		if own := m.fairValue(w.model, w.fair.tenant, ms); any && state.FairLess(own, least) {
			m.fair.counters[fairKey{w.model, w.fair.tenant}] = fairCounter{v: least, at: ms}
		}
	}
	tenants[w.fair.tenant] = append(tenants[w.fair.tenant], w)
}

// fairLeave takes a waiter out of its band (granted, cancelled, shed or
// lapsed).
func (m *Store) fairLeave(w *memWaiter) {
	b := fairBand{w.model, w.priority.Rank()}
	tenants := m.fair.bands[b]
	q := tenants[w.fair.tenant]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(tenants, w.fair.tenant)
		if len(tenants) == 0 {
			delete(m.fair.bands, b)
		}
		return
	}
	tenants[w.fair.tenant] = q
}

// fairCharge adds dispatch id's cost to its tenant's counter, and keeps
// what its release may give back.
func (m *Store) fairCharge(id string, w fairWaiter, now time.Time) {
	m.fairInit()
	ms := now.UnixMilli()
	k := fairKey{w.model, w.tenant}
	m.fair.counters[k] = fairCounter{v: m.fairValue(w.model, w.tenant, ms) + w.cost, at: ms}
	if w.chargedOutput > 0 && w.outputCost > 0 {
		m.fair.held[id] = fairHeld{key: k, chargedOutput: w.chargedOutput, outputCost: w.outputCost}
	}
}

// fairWaiter is what the fair queue knows of a request.
type fairWaiter struct {
	model, tenant string
	cost          float64
	chargedOutput int
	outputCost    float64
}

func fairOf(q *state.QueueSpec) fairWaiter {
	return fairWaiter{model: q.Model, tenant: q.FairTenant(), cost: q.FairCost(), chargedOutput: q.ChargedOutput, outputCost: q.OutputCost}
}

// fairSettle gives claim r.ID's tenant back the output it was charged for
// and did not produce, if the claim is still held; unhold forgets the
// record in any case.
func (m *Store) fairSettle(r state.Release, now time.Time) {
	h, ok := m.fair.held[r.ID]
	if _, held := m.claims[r.ID]; !ok || !held {
		return
	}
	refund := state.FairRefund(h.chargedOutput, r.OutputTokens, h.outputCost)
	if refund <= 0 {
		return
	}
	ms := now.UnixMilli()
	v := m.fairValue(h.key.model, h.key.tenant, ms)
	m.fair.counters[h.key] = fairCounter{v: max(0, v-refund), at: ms}
}

// fairHead is the waiter the model's queue dispatches next: in the best
// non-empty band, the oldest waiter of the tenant with the least counter
// (ties: the oldest head). nil when the queue is empty.
func (m *Store) fairHead(model string, now time.Time) *memWaiter {
	ms := now.UnixMilli()
	for rank := range 3 {
		var best *memWaiter
		bestV := 0.0
		for t, q := range m.fair.bands[fairBand{model, rank}] {
			v := m.fairValue(model, t, ms)
			if best == nil || state.FairLess(v, bestV) || (!state.FairLess(bestV, v) && q[0].seq < best.seq) {
				best, bestV = q[0], v
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// fairPrune forgets decayed counters of tenants with no waiter (see
// state.FairForget); Pump calls it.
func (m *Store) fairPrune(now time.Time) {
	if m.limits.FairHalfLife <= 0 {
		return
	}
	ms := now.UnixMilli()
	for k := range m.fair.counters {
		if m.fairValue(k.model, k.tenant, ms) >= state.FairForget {
			continue
		}
		waiting := false
		for rank := range 3 {
			if len(m.fair.bands[fairBand{k.model, rank}][k.tenant]) > 0 {
				waiting = true
			}
		}
		if !waiting {
			delete(m.fair.counters, k)
		}
	}
}
