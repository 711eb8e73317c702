package emulate

import (
	"hash/fnv"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// LeastRequestP2C emulates Envoy's LEAST_REQUEST load balancer with its
// defaults (choice_count 2, equal weights): of two hosts drawn at random,
// the one with fewer active requests. It is Envoy's own policy, not a
// router's scheduler: llm-bench compare runs the real Envoy for it, so
// only the fleet simulator registers this stand-in (SimulatorOnly).
const LeastRequestP2C = "least_request_p2c"

// leastRequestChoices is Envoy's choice_count default.
const leastRequestChoices = 2

// leastRequestP2C is least_request_p2c, Envoy's LEAST_REQUEST load
// balancer with its defaults, for the fleet simulator, where no Envoy
// runs: with equal host weights, draw choice_count (2) hosts at random,
// with replacement, and take the one with fewer active requests; on a
// tie the first drawn stays. Active requests are this Envoy instance's
// own (a host's rq_active), so each router replica here is one Envoy
// instance with its own counts, fed by Claimed and Released.
//
// Candidates: the two drawn carry their active counts as cost (the second
// drawn half a request more, so it wins only when strictly less loaded);
// every other worker costs Infinite, so the store takes it only if both
// drawn are at their cap (Envoy has no cap; the benchmark runs it
// uncapped).
//
// Simplified: Envoy draws from its own random generator. The emulation,
// pure, has none: it draws from a running hash into which every decision
// mixes the first candidates of the random order the scheduler gives them
// (scheduler.Options.Shuffle), so its draws are as reproducible as the
// scheduler's seed and differ between replicas.
type leastRequestP2C struct {
	mu       sync.Mutex
	active   map[string]int    // worker → this instance's in-flight requests
	inflight map[string]string // claim id → worker
	state    uint64            // the draws' running hash
}

var _ scoring.Strategy = (*leastRequestP2C)(nil)

// NewLeastRequestP2C returns the emulation for one router replica (one
// Envoy instance), with no request counted.
func NewLeastRequestP2C() scoring.Strategy { return newLeastRequestP2C() }

func newLeastRequestP2C() *leastRequestP2C {
	return &leastRequestP2C{active: map[string]int{}, inflight: map[string]string{}}
}

func (*leastRequestP2C) Name() string { return LeastRequestP2C }

// Plan draws two workers and costs them by their active requests.
func (s *leastRequestP2C) Plan(_ scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	draws := s.draw(eligible)
	out := make([]scoring.Candidate, len(eligible))
	for i, w := range eligible {
		terms := []scoring.Term{{Name: "not_drawn", Weight: 1, Value: scoring.Infinite}}
		for k, d := range draws {
			if d != i {
				continue
			}
			// The first draw holding i decides: a worker drawn twice is
			// the first draw.
			terms = []scoring.Term{
				{Name: "active_requests", Weight: 1, Value: float64(s.active[w.ID])},
				{Name: "later_draw", Weight: 0.5, Value: float64(k)},
			}
			break
		}
		base := 0.0
		for _, t := range terms {
			base += t.Contribution()
		}
		out[i] = scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Base: base}, Terms: terms}
	}
	return out
}

// draw returns leastRequestChoices indices into eligible, uniform and
// independent in practice, with replacement.
func (s *leastRequestP2C) draw(eligible []scoring.Worker) [leastRequestChoices]int {
	for _, w := range eligible[:min(2, len(eligible))] {
		h := fnv.New64a()
		h.Write([]byte(w.ID))
		s.state = splitmix64(s.state ^ h.Sum64())
	}
	var out [leastRequestChoices]int
	for k := range out {
		s.state = splitmix64(s.state)
		out[k] = int(s.state % uint64(len(eligible)))
	}
	return out
}

// splitmix64 is one step of the SplitMix64 generator's output function
// applied to x plus its increment.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Claimed counts the request as active on worker.
func (s *leastRequestP2C) Claimed(id string, _ scoring.Job, worker string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active[worker]++
	s.inflight[id] = worker
}

// Released ends the request's active count.
func (s *leastRequestP2C) Released(id string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	worker, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	if s.active[worker]--; s.active[worker] <= 0 {
		delete(s.active, worker)
	}
}
