package fairness

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"time"
)

// request is one request of a run.
type request struct {
	id      int
	tenant  int
	replica int
	in, out int
	arrive  time.Duration
	start   time.Duration // dispatch time; -1 while waiting
	worker  int
}

// dispatcher decides which waiting request gets a freed slot. arrive and
// done call run.start for every request they dispatch.
type dispatcher interface {
	arrive(r *request)
	done(r *request)
}

// run is one scenario under one dispatcher and seed, in virtual time.
type run struct {
	sc       Scenario
	now      time.Duration
	reqs     []*request
	running  completions
	started  []*request // in dispatch order
	inflight []int      // per worker
}

// completions is a min-heap of running requests by end time.
type completions []*request

func (c completions) Len() int { return len(c) }
func (c completions) Less(i, j int) bool {
	ei, ej := c[i].start+serviceTime(c[i].in, c[i].out), c[j].start+serviceTime(c[j].in, c[j].out)
	if ei != ej {
		return ei < ej
	}
	return c[i].id < c[j].id
}
func (c completions) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)   { *c = append(*c, x.(*request)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// arrivals draws every tenant's Poisson arrivals (only while it is on),
// each sent on one of the tenant's connections, each connection pinned to
// a replica for the run.
func arrivals(sc Scenario, rng *rand.Rand) []*request {
	var out []*request
	for ti, t := range sc.Tenants {
		var conns [connections]int
		for i := range conns {
			conns[i] = rng.IntN(replicas)
		}
		at, k := time.Duration(0), 0
		for {
			at += time.Duration(rng.ExpFloat64() / t.Rate * float64(time.Second))
			if at >= sc.Duration {
				break
			}
			if !t.on(at) {
				continue // a silence: the arrival process runs on, unsent
			}
			out = append(out, &request{tenant: ti, replica: conns[k%connections], in: t.Input, out: t.Output, arrive: at, start: -1})
			k++
		}
	}
	slices.SortStableFunc(out, func(a, b *request) int { return int(a.arrive - b.arrive) })
	for i, r := range out {
		r.id = i
	}
	return out
}

// start dispatches r on worker w now.
func (x *run) start(r *request, w int) {
	r.start, r.worker = x.now, w
	x.inflight[w]++
	x.started = append(x.started, r)
	heap.Push(&x.running, r)
}

// play runs the scenario to its end: arrivals and completions in time
// order (a completion first on a tie, so that its slot is free).
func (x *run) play(d dispatcher) {
	next := 0
	for {
		var done *request
		if len(x.running) > 0 {
			done = x.running[0]
		}
		arrival := next < len(x.reqs)
		switch {
		case done != nil && (!arrival || done.start+serviceTime(done.in, done.out) <= x.reqs[next].arrive):
			heap.Pop(&x.running)
			x.now = done.start + serviceTime(done.in, done.out)
			if x.now > x.sc.Duration {
				return
			}
			x.inflight[done.worker]--
			d.done(done)
		case arrival:
			r := x.reqs[next]
			next++
			x.now = r.arrive
			d.arrive(r)
		default:
			return
		}
	}
}
