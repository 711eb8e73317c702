package emulate

import (
	"container/list"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Upstream defaults of the Gateway API Inference Extension's prefix-cache
// scorer plugin and of the default scheduling profile that uses it.
const (
	// gieMaxBlocks is maxPrefixBlocksToMatch: only a prompt's first 256
	// blocks are indexed and matched.
	gieMaxBlocks = 256
	// gieLRUCapacity is lruCapacityPerServer: blocks remembered per server
	// (upstream sized it as ~500k tokens of KV on an H100 / 16).
	gieLRUCapacity = 31250
	// Weights of the profile: prefix 3, queue 2, KV utilisation 2. The
	// latter two are queue_kv_max_score's (gie.go), reused as is.
	giePrefixWeight = 3
)

// prefixQueueKV is prefix_queue_kv_max_score: the approximate prefix-cache
// scorer added to queue_kv_max_score. Prefix score = leading blocks matched
// by the routing history / blocks of the request (first 256); total =
// 3·prefix + 2·queue + 2·kv, highest wins.
//
// The index is upstream's: per server, an LRU of the block hashes routed to
// it, capped at lruCapacityPerServer, fed only by this replica's own
// routing decisions (not by the engines). A match walks the request's
// blocks in order and stops at the first block no server holds; every
// server holding a block up to there gets one more matched block, as
// upstream counts it. Upstream also mixes the model name into the first
// hash; here candidates are already filtered by model, and an index entry
// for another model's worker never scores for this one.
type prefixQueueKV struct {
	queueKV     scoring.Strategy // queue_kv_max_score
	lruCapacity int              // upstream default; tests shrink it

	mu      sync.Mutex
	servers map[string]*blockLRU
}

var _ scoring.Strategy = (*prefixQueueKV)(nil)

func newPrefixQueueKV() *prefixQueueKV {
	return &prefixQueueKV{queueKV: queueKVMaxScore{}, lruCapacity: gieLRUCapacity, servers: map[string]*blockLRU{}}
}

func (*prefixQueueKV) Name() string { return PrefixQueueKVMaxScore }

// Plan adds the weighted prefix score to queue_kv_max_score's candidates:
// Base = −(3·prefix + 2·queue + 2·kv).
func (s *prefixQueueKV) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	out := s.queueKV.Plan(in, eligible)
	blocks := firstBlocks(in.Job.Blocks)
	s.mu.Lock()
	matched := s.match(blocks)
	s.mu.Unlock()
	for i := range out {
		score := 0.0
		if len(blocks) > 0 {
			score = float64(matched[out[i].Worker]) / float64(len(blocks))
		}
		t := scoring.Term{Name: "prefix_score", Weight: giePrefixWeight, Value: score}
		out[i].Curve.Base -= t.Contribution()
		out[i].Terms = append([]scoring.Term{t}, out[i].Terms...)
	}
	return out
}

// Claimed records the request's blocks as routed to worker, as upstream's
// PreRequest hook does once the pick is made.
func (s *prefixQueueKV) Claimed(_ string, job scoring.Job, worker string, _ time.Time) {
	blocks := firstBlocks(job.Blocks)
	if len(blocks) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.servers[worker]
	if l == nil {
		l = newBlockLRU(s.lruCapacity)
		s.servers[worker] = l
	}
	for _, b := range blocks {
		l.add(b)
	}
}

// Released does nothing: the scorer's index outlives requests, and the
// queue and KV scorers read the workers' own metrics.
func (*prefixQueueKV) Released(string, time.Time) {}

// match counts, per server, the blocks it holds among the request's
// leading blocks that some server holds (upstream's matchLongestPrefix).
func (s *prefixQueueKV) match(blocks []uint64) map[string]int {
	matched := make(map[string]int, len(s.servers))
	for _, b := range blocks {
		found := false
		for id, l := range s.servers {
			if l.has(b) {
				matched[id]++
				found = true
			}
		}
		if !found {
			break
		}
	}
	return matched
}

func firstBlocks(b []uint64) []uint64 { return b[:min(len(b), gieMaxBlocks)] }

// blockLRU is one server's block hashes, least recently routed first out.
type blockLRU struct {
	capacity int
	order    *list.List // front: most recent
	at       map[uint64]*list.Element
}

func newBlockLRU(capacity int) *blockLRU {
	return &blockLRU{capacity: capacity, order: list.New(), at: map[uint64]*list.Element{}}
}

func (l *blockLRU) has(b uint64) bool { _, ok := l.at[b]; return ok }

func (l *blockLRU) add(b uint64) {
	if e, ok := l.at[b]; ok {
		l.order.MoveToFront(e)
		return
	}
	l.at[b] = l.order.PushFront(b)
	if l.order.Len() > l.capacity {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.at, oldest.Value.(uint64))
	}
}
