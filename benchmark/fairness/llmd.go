package fairness

import "math/rand/v2"

// llmdDispatcher emulates llm-d's flow control with its round-robin
// fairness policy: each replica queues the requests it receives, per
// tenant, and dispatches from them in round robin over its own tenants
// while the pool has room; the replicas share the pool but not their
// queues or counters, so a freed slot goes to whichever replica sees it
// first (here: one of the backlogged replicas at random).
type llmdDispatcher struct {
	x        *run
	rng      *rand.Rand
	replicas [replicas]rrQueue
}

var _ dispatcher = (*llmdDispatcher)(nil)

// rrQueue is one replica's queues: per tenant in arrival order, and the
// tenants' round-robin ring.
type rrQueue struct {
	byTenant map[int][]*request
	ring     []int // tenants in the order they first queued
	next     int   // ring index of the next tenant to serve
	waiting  int
}

func (q *rrQueue) push(r *request) {
	if q.byTenant == nil {
		q.byTenant = map[int][]*request{}
	}
	if _, ok := q.byTenant[r.tenant]; !ok {
		q.ring = append(q.ring, r.tenant)
	}
	q.byTenant[r.tenant] = append(q.byTenant[r.tenant], r)
	q.waiting++
}

// pop takes the head of the next backlogged tenant in the ring.
func (q *rrQueue) pop() *request {
	for range q.ring {
		t := q.ring[q.next%len(q.ring)]
		q.next = (q.next + 1) % len(q.ring)
		if w := q.byTenant[t]; len(w) > 0 {
			q.byTenant[t] = w[1:]
			q.waiting--
			return w[0]
		}
	}
	return nil
}

// freeWorker is the least loaded worker with room, or -1.
func (d *llmdDispatcher) freeWorker() int {
	best := -1
	for w, n := range d.x.inflight {
		if n < d.x.sc.Cap && (best < 0 || n < d.x.inflight[best]) {
			best = w
		}
	}
	return best
}

func (d *llmdDispatcher) arrive(r *request) {
	q := &d.replicas[r.replica]
	if w := d.freeWorker(); w >= 0 && q.waiting == 0 {
		d.x.start(r, w)
		return
	}
	q.push(r)
	d.drain()
}

func (d *llmdDispatcher) done(*request) { d.drain() }

// drain fills free slots from the backlogged replicas.
func (d *llmdDispatcher) drain() {
	for {
		w := d.freeWorker()
		if w < 0 {
			return
		}
		var backlogged []int
		for i := range d.replicas {
			if d.replicas[i].waiting > 0 {
				backlogged = append(backlogged, i)
			}
		}
		if len(backlogged) == 0 {
			return
		}
		d.x.start(d.replicas[backlogged[d.rng.IntN(len(backlogged))]].pop(), w)
	}
}
