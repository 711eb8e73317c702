package memory

import (
	"context"
	"slices"
	"time"

	"github.com/llm-router/llm-router/state"
)

// This file holds the in-memory store's queues: waiters by model and
// priority, handing freed slots to them (late binding), shedding, cancel
// and poll. The Redis scripts claim.lua, pump.lua, cancel.lua and poll.lua
// do the same.

// memWaiter is a request waiting in its model's queue.
type memWaiter struct {
	id, model, replica string
	priority           state.Priority
	seq                int64
	expiry             time.Time
	tok                claimTokens // held on the worker it is granted
	fair               fairWaiter  // its fair-queue tenant and charge (fair.go)
}

// enqueue adds a new waiter to its model's queue and returns its 1-based
// position by priority, then arrival.
func (m *Store) enqueue(w *memWaiter, now time.Time) int {
	m.waiters[w.id] = w
	queue := m.queues[w.model]
	at, _ := slices.BinarySearchFunc(queue, w, waiterOrder)
	m.queues[w.model] = slices.Insert(queue, at, w)
	m.fairJoin(w, now)
	return at + 1
}

func waiterOrder(a, b *memWaiter) int {
	if ra, rb := a.priority.Rank(), b.priority.Rank(); ra != rb {
		return ra - rb
	}
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

func (m *Store) globalRoom() bool { return m.limits.GlobalCap <= 0 || m.total < m.limits.GlobalCap }

func (m *Store) hold(id, worker string, now time.Time, tok claimTokens) {
	w := m.workers[worker]
	w.InFlight++
	w.addTokens(tok, 1)
	m.total++
	m.claims[id] = &memClaim{worker: worker, expiry: now.Add(m.limits.Lease), tok: tok}
}

func (m *Store) unhold(id string) (string, bool) {
	c, ok := m.claims[id]
	if !ok {
		return "", false
	}
	delete(m.claims, id)
	delete(m.grants, id)
	delete(m.fair.held, id)
	m.total = max(0, m.total-1)
	if w, ok := m.workers[c.worker]; ok {
		w.InFlight = max(0, w.InFlight-1)
		w.addTokens(c.tok, -1)
	}
	m.unplaceAdapter(c)
	return c.worker, true
}

func (m *Store) dropWaiter(id string) *memWaiter {
	w, ok := m.waiters[id]
	if !ok {
		return nil
	}
	delete(m.waiters, id)
	q := m.queues[w.model]
	if i := slices.Index(q, w); i >= 0 {
		m.queues[w.model] = slices.Delete(q, i, i+1)
	}
	m.fairLeave(w)
	return w
}

func (m *Store) grant(id, worker string, now time.Time) {
	w := m.dropWaiter(id)
	var tok claimTokens
	if w != nil {
		tok = w.tok
	}
	m.hold(id, worker, now, tok)
	m.grants[id] = worker
	if w != nil {
		m.fairCharge(id, w.fair, now)
		m.outbox = append(m.outbox, outgoing{w.replica, state.Notice{Waiter: id, Worker: worker}})
	}
}

func (m *Store) shedNewestBatch(model string) {
	q := m.queues[model]
	if len(q) == 0 || q[len(q)-1].priority != state.PriorityBatch {
		return
	}
	victim := m.dropWaiter(q[len(q)-1].id)
	m.outbox = append(m.outbox, outgoing{victim.replica, state.Notice{Waiter: victim.id, Shed: true}})
}

// pumpWorker gives free slots of worker id to the best-placed waiters of
// the models it serves (late binding).
func (m *Store) pumpWorker(id string, now time.Time) {
	w, ok := m.workers[id]
	if !ok {
		return
	}
	for w.free() && m.globalRoom() {
		// Each model's fair head; between models, priority then arrival.
		var best *memWaiter
		for _, model := range w.Spec.Models {
			if h := m.fairHead(model, now); h != nil && (best == nil || waiterOrder(h, best) < 0) {
				best = h
			}
		}
		// Priority order holds: a head waiter past the token limit waits
		// for room here or on another worker, and no one passes it.
		if best == nil || !w.tokenRoom(best.tok.need()) {
			return
		}
		m.grant(best.id, id, now)
	}
}

// pumpModel grants free slots among the model's workers to its waiters,
// least loaded (in-flight over the cap in force; 0 with no cap) first,
// ties to the fewest in flight, then to the lowest worker id.
func (m *Store) pumpModel(model string, now time.Time) {
	for len(m.queues[model]) > 0 && m.globalRoom() {
		head := m.fairHead(model, now)
		var best *memWorker
		load := 0.0
		for _, id := range m.order {
			w := m.workers[id]
			if !w.free() || !slices.Contains(w.Spec.Models, model) || !w.tokenRoom(head.tok.need()) {
				continue
			}
			// Load against the cap in force (a learned limit lowers it),
			// as the scripts' pump_model (prelude.lua).
			l := 0.0
			if c := w.capFor(w.Spec.MaxConcurrency); c > 0 {
				l = float64(w.InFlight) / float64(c)
			}
			if best == nil || l < load || (l == load && (w.InFlight < best.InFlight || (w.InFlight == best.InFlight && id < best.Spec.ID))) {
				best, load = w, l
			}
		}
		if best == nil {
			return
		}
		m.grant(head.id, best.Spec.ID, now)
	}
}

// Cancel takes a waiter out of its queue (see cancel.lua).
func (m *Store) Cancel(_ context.Context, id string) (state.WaiterStatus, error) {
	m.lock()
	defer m.unlock()
	if m.dropWaiter(id) != nil {
		return state.WaiterStatus{State: state.WaiterRemoved}, nil
	}
	return m.status(id), nil
}

// Poll says where a waiter stands (see poll.lua).
func (m *Store) Poll(_ context.Context, id string) (state.WaiterStatus, error) {
	m.lock()
	defer m.unlock()
	return m.status(id), nil
}

func (m *Store) status(id string) state.WaiterStatus {
	if w, ok := m.waiters[id]; ok {
		return state.WaiterStatus{State: state.WaiterQueued, Position: slices.Index(m.queues[w.model], w) + 1}
	}
	if worker, ok := m.grants[id]; ok {
		if _, held := m.claims[id]; held {
			return state.WaiterStatus{State: state.WaiterGranted, Worker: worker}
		}
	}
	return state.WaiterStatus{State: state.WaiterGone}
}

// Pump hands free slots to waiters of every model.
func (m *Store) Pump(_ context.Context) error {
	m.lock()
	defer m.unlock()
	now := m.now()
	m.purge(now, true)
	for model := range m.queues {
		m.pumpModel(model, now)
	}
	m.fairPrune(now)
	return nil
}
