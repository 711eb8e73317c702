package emulate

import (
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// preciseSpeculativeTTL is speculativeTTL: how long a pick's blocks count
// as cached on its endpoint before the engine's events confirm them (the
// guide turns speculativeIndexing on).
const preciseSpeculativeTTL = 2 * time.Second

// PrecisePrefix is precise_prefix_queue_kv_max_score, llm-d's precise
// prefix-cache-aware profile: the prefix-cache scorer on an index fed by
// the engines' own KV cache events (block stored, block removed) plus the
// queue and KV-utilisation scorers, 3:2:2, highest total wins.
//
// Prefix score = leading blocks of the request the endpoint holds /
// request blocks, in the engine's block size (the indexer recomputes the
// engine's block keys from the tokens, so it matches what the engine
// caches). What an endpoint holds is what its events say it stored and
// has not removed, plus, per replica, the blocks of the requests this
// replica routed there in the last 2 s (speculative indexing), which
// stands for a cache the events have not confirmed yet.
//
// Every router replica subscribes to every engine (upstream's
// active-active layout), so every replica's index sees the same events;
// only the speculative entries differ. The emulation is fed by its
// caller: Apply for each event, in order. It is pure: only a benchmark
// that has the engines' events (the fleet simulator) can run it
// faithfully; without them it sees only its speculative entries.
//
// Simplified: events arrive the instant the engine records them (no
// publishing or ZMQ delay); the engine records a block when the step
// computing it ends, where vLLM records it when the step is scheduled.
type PrecisePrefix struct {
	queueKV queueKVMaxScore

	mu          sync.Mutex
	held        map[string]map[uint64]struct{} // endpoint → blocks its events stored
	speculative map[string]map[uint64]int64    // endpoint → block → expiry (unix nanos)
}

var _ scoring.Strategy = (*PrecisePrefix)(nil)

// NewPrecisePrefix returns an instance with an empty index, for one
// router replica.
func NewPrecisePrefix() *PrecisePrefix {
	return &PrecisePrefix{held: map[string]map[uint64]struct{}{}, speculative: map[string]map[uint64]int64{}}
}

// Name is PrecisePrefixQueueKVMaxScore.
func (*PrecisePrefix) Name() string { return PrecisePrefixQueueKVMaxScore }

// Stored records blocks the endpoint's engine stored in its prefix cache.
func (p *PrecisePrefix) Stored(endpoint string, blocks []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.held[endpoint]
	if m == nil {
		m = map[uint64]struct{}{}
		p.held[endpoint] = m
	}
	for _, b := range blocks {
		m[b] = struct{}{}
	}
}

// Removed records blocks the endpoint's engine evicted.
func (p *PrecisePrefix) Removed(endpoint string, blocks []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.held[endpoint]
	for _, b := range blocks {
		delete(m, b)
	}
}

// Holds reports whether the index has block as stored by endpoint's
// engine (speculative entries aside).
func (p *PrecisePrefix) Holds(endpoint string, block uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.held[endpoint][block]
	return ok
}

// Plan adds the weighted prefix score to queue_kv_max_score's candidates:
// Base = −(3·prefix + 2·queue + 2·kv).
func (p *PrecisePrefix) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	out := p.queueKV.Plan(in, eligible)
	blocks := in.Job.Blocks
	now := nanos(in.Now)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range out {
		score := 0.0
		if len(blocks) > 0 {
			score = float64(p.leading(out[i].Worker, blocks, now)) / float64(len(blocks))
		}
		t := scoring.Term{Name: "prefix_score", Weight: giePrefixWeight, Value: score}
		out[i].Curve.Base -= t.Contribution()
		out[i].Terms = append([]scoring.Term{t}, out[i].Terms...)
	}
	return out
}

// leading is the request's leading blocks endpoint holds, confirmed or
// speculatively.
func (p *PrecisePrefix) leading(endpoint string, blocks []uint64, now int64) int {
	held, spec := p.held[endpoint], p.speculative[endpoint]
	return leading(blocks, func(b uint64) bool {
		if _, ok := held[b]; ok {
			return true
		}
		at, ok := spec[b]
		return ok && at > now
	})
}

// Claimed adds the request's blocks to endpoint's speculative entries for
// the next 2 s; expired entries of that endpoint are dropped.
func (p *PrecisePrefix) Claimed(_ string, job scoring.Job, endpoint string, now time.Time) {
	if len(job.Blocks) == 0 {
		return
	}
	t := nanos(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.speculative[endpoint]
	if m == nil {
		m = map[uint64]int64{}
		p.speculative[endpoint] = m
	}
	for b, at := range m {
		if at <= t {
			delete(m, b)
		}
	}
	until := t + int64(preciseSpeculativeTTL)
	for _, b := range job.Blocks {
		m[b] = until
	}
}

// Released does nothing: the index follows the engines, not requests.
func (*PrecisePrefix) Released(string, time.Time) {}
