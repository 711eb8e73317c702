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
}

func (m *Store) fairValue(model, tenant string, now int64) float64 {
	c := m.fair.counters[fairKey{model, tenant}]
	return state.FairDecay(c.v, c.at, now, m.limits.FairHalfLife.Milliseconds())
}

// fairJoin adds a new waiter to its band, lifting its tenant to the least
// counter among the band's backlogged tenants if it had no waiter there.
func (m *Store) fairJoin(w *memWaiter, now time.Time) {
	if m.fair.bands == nil {
		m.fair.bands = map[fairBand]map[string][]*memWaiter{}
		m.fair.counters = map[fairKey]fairCounter{}
	}
	b := fairBand{w.model, w.priority.Rank()}
	tenants := m.fair.bands[b]
	if tenants == nil {
		tenants = map[string][]*memWaiter{}
		m.fair.bands[b] = tenants
	}
	if len(tenants[w.tenant]) == 0 {
		ms := now.UnixMilli()
		least, any := 0.0, false
		for t := range tenants {
			if v := m.fairValue(w.model, t, ms); !any || v < least {
				least, any = v, true
			}
		}
		if own := m.fairValue(w.model, w.tenant, ms); any && own < least {
			m.fair.counters[fairKey{w.model, w.tenant}] = fairCounter{v: least, at: ms}
		}
	}
	tenants[w.tenant] = append(tenants[w.tenant], w)
}

// fairLeave takes a waiter out of its band (granted, cancelled, shed or
// lapsed).
func (m *Store) fairLeave(w *memWaiter) {
	b := fairBand{w.model, w.priority.Rank()}
	tenants := m.fair.bands[b]
	q := tenants[w.tenant]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(tenants, w.tenant)
		if len(tenants) == 0 {
			delete(m.fair.bands, b)
		}
		return
	}
	tenants[w.tenant] = q
}

// fairCharge adds a dispatch's cost to its tenant's counter.
func (m *Store) fairCharge(model, tenant string, cost float64, now time.Time) {
	if m.fair.counters == nil {
		m.fair.counters = map[fairKey]fairCounter{}
		m.fair.bands = map[fairBand]map[string][]*memWaiter{}
	}
	ms := now.UnixMilli()
	m.fair.counters[fairKey{model, tenant}] = fairCounter{v: m.fairValue(model, tenant, ms) + cost, at: ms}
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
			if best == nil || v < bestV || (v == bestV && q[0].seq < best.seq) {
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
