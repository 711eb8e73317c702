package emulate

import (
	"container/list"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Weights of the Gateway API Inference Extension / llm-d default profile
// with the prefix-cache scorer: prefix 3, queue 2, KV utilisation 2. The
// latter two are queue_kv_max_score's (gie.go), reused as is.
const giePrefixWeight = 3

// prefixQueueKV is prefix_queue_kv_max_score: the prefix-cache scorer on
// llm-d's approximate index (approx.go: 64-token blocks, first 131,072
// tokens, per-server LRU sized from the engine's KV) added to
// queue_kv_max_score. Prefix score = leading blocks matched by the
// routing history / 64-token blocks of the request (the scorer's default
// matchLengthWeight 0); total = 3·prefix + 2·queue + 2·kv, highest wins.
//
// The index is fed only by this replica's own routing decisions (not by
// the engines). Upstream also mixes the model name into the first hash;
// here candidates are already filtered by model, and an index entry for
// another model's worker never scores for this one.
type prefixQueueKV struct {
	queueKV scoring.Strategy // queue_kv_max_score

	mu    sync.Mutex
	index *approxIndex
}

var _ scoring.Strategy = (*prefixQueueKV)(nil)

func newPrefixQueueKV() *prefixQueueKV {
	return &prefixQueueKV{queueKV: queueKVMaxScore{}, index: newApproxIndex()}
}

func (*prefixQueueKV) Name() string { return PrefixQueueKVMaxScore }

// Plan adds the weighted prefix score to queue_kv_max_score's candidates:
// Base = −(3·prefix + 2·queue + 2·kv).
func (s *prefixQueueKV) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	out := s.queueKV.Plan(in, eligible)
	blocks := approxBlocks(in.Job.Blocks)
	s.mu.Lock()
	for _, w := range eligible {
		s.index.tune(w.ID, w.KVBlocks)
	}
	matched := s.index.match(blocks)
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
	blocks := approxBlocks(job.Blocks)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index.add(worker, blocks)
}

// Released does nothing: the scorer's index outlives requests, and the
// queue and KV scorers read the workers' own metrics.
func (*prefixQueueKV) Released(string, time.Time) {}

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
