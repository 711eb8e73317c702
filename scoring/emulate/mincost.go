package emulate

import (
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Defaults of NVIDIA Dynamo's KV router (KvRouterConfig) that apply in its
// approximate mode (--no-kv-events).
const (
	dynOverlapWeight = 1.0               // overlap_score_weight
	dynTTL           = 120 * time.Second // router_ttl_secs: a routed block is assumed cached this long
	dynMaxTreeSize   = 1 << 20           // router_max_tree_size, (worker, block) entries
	dynPruneRatio    = 0.8               // router_prune_target_ratio
	// router_temperature 0: the lowest cost wins, deterministically.
)

// prefixOverlapMinCost is prefix_overlap_min_cost, Dynamo's KV router in
// approximate mode. For each worker:
//
//	overlap        = leading request blocks routed to the worker in the last 120 s
//	prefill_tokens = active_prefill_tokens + max(prompt_tokens − 16·overlap, 0)
//	decode_blocks  = active_blocks + request blocks not already active there
//	cost           = overlap_score_weight · prefill_tokens / 16 + decode_blocks
//
// and the lowest cost wins (router_temperature 0). active_* are this
// replica's own bookkeeping of the requests it routed and that are not yet
// released; active blocks count each distinct block once, as a worker's
// running requests share a cached prefix.
//
// Simplified: a request's uncached tokens count as prefill until the
// request is released (Dynamo retires them at the first token, which the
// scheduler learns only at the end); its decode blocks are its prompt's
// blocks, not grown by output tokens (Dynamo's default,
// router_track_output_blocks off, does the same); equal costs are broken at
// random, where Dynamo first prefers the smaller tree. A request's blocks
// beyond the hashed ones (the partial last block and JSON framing) count as
// blocks of its own. Expiry and pruning are lazy: an entry past its 120 s is
// never matched, and is dropped at the next decision; when the index holds
// more than router_max_tree_size entries, the oldest go first until 80 %
// remain.
type prefixOverlapMinCost struct {
	// Upstream defaults; tests shrink them.
	ttl        time.Duration
	maxEntries int

	mu     sync.Mutex
	cached map[string]map[uint64]int64 // worker → block → expiry (unix nanos)
	queue  []expiry                    // entries in the order they expire
	head   int                         // queue[:head] is consumed
	size   int                         // entries in cached, all workers
	active map[string]*activeLoad      // worker → requests routed, not released
	routed map[string]routedRequest    // claim id → what it added
}

type expiry struct {
	worker string
	block  uint64
	at     int64
}

type activeLoad struct {
	requests      int
	prefillTokens int
	blocks        map[uint64]int // distinct hashed blocks → requests holding them
	ownBlocks     int            // blocks no other request can share
}

type routedRequest struct {
	worker        string
	prefillTokens int
	blocks        []uint64
	ownBlocks     int
}

var _ scoring.Strategy = (*prefixOverlapMinCost)(nil)

func newPrefixOverlapMinCost() *prefixOverlapMinCost {
	return &prefixOverlapMinCost{
		ttl: dynTTL, maxEntries: dynMaxTreeSize,
		cached: map[string]map[uint64]int64{}, active: map[string]*activeLoad{}, routed: map[string]routedRequest{},
	}
}

func (*prefixOverlapMinCost) Name() string { return PrefixOverlapMinCost }

// Plan prices every worker; Base is the cost.
func (s *prefixOverlapMinCost) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	now := nanos(in.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	out := make([]scoring.Candidate, len(eligible))
	for i, w := range eligible {
		overlap, newTokens := s.overlap(in.Job, w.ID, now)
		load := s.active[w.ID]
		prefill, decode := newTokens, s.newBlocks(in.Job, load)
		if load != nil {
			prefill += load.prefillTokens
			decode += len(load.blocks) + load.ownBlocks
		}
		terms := []scoring.Term{
			{Name: "overlap_blocks", Value: float64(overlap)},
			{Name: "prefill_blocks", Weight: dynOverlapWeight, Value: float64(prefill) / blockTokens},
			{Name: "decode_blocks", Weight: 1, Value: float64(decode)},
		}
		cost := terms[1].Contribution() + terms[2].Contribution()
		out[i] = scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Base: cost}, Terms: terms}
	}
	return out
}

// Claimed books the request's uncached prompt tokens and its blocks as
// active on worker, and assumes its blocks cached there for the next 120 s.
func (s *prefixOverlapMinCost) Claimed(id string, job scoring.Job, worker string, now time.Time) {
	t := nanos(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(t)
	_, newTokens := s.overlap(job, worker, t)
	r := routedRequest{worker: worker, prefillTokens: newTokens, blocks: job.Blocks, ownBlocks: ownBlocks(job)}
	s.routed[id] = r
	load := s.active[worker]
	if load == nil {
		load = &activeLoad{blocks: map[uint64]int{}}
		s.active[worker] = load
	}
	load.requests++
	load.prefillTokens += r.prefillTokens
	load.ownBlocks += r.ownBlocks
	for _, b := range r.blocks {
		load.blocks[b]++
	}
	s.cache(worker, job.Blocks, t+int64(s.ttl))
}

// Released takes the request's tokens and blocks off its worker's active
// load; what it cached stays until its 120 s are up.
func (s *prefixOverlapMinCost) Released(id string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.routed[id]
	if !ok {
		return
	}
	delete(s.routed, id)
	load := s.active[r.worker]
	load.requests--
	load.prefillTokens -= r.prefillTokens
	load.ownBlocks -= r.ownBlocks
	for _, b := range r.blocks {
		if load.blocks[b]--; load.blocks[b] <= 0 {
			delete(load.blocks, b)
		}
	}
	if load.requests == 0 {
		delete(s.active, r.worker)
	}
}

// overlap is the request's leading blocks cached on worker and the prompt
// tokens left to prefill there.
func (s *prefixOverlapMinCost) overlap(job scoring.Job, worker string, now int64) (blocks, newTokens int) {
	cached := s.cached[worker]
	blocks = leading(job.Blocks, func(b uint64) bool { at, ok := cached[b]; return ok && at > now })
	return blocks, max(job.PromptTokens-blocks*blockTokens, 0)
}

// newBlocks is the request's blocks that would add to load.
func (s *prefixOverlapMinCost) newBlocks(job scoring.Job, load *activeLoad) int {
	n := ownBlocks(job)
	for _, b := range job.Blocks {
		if load == nil || load.blocks[b] == 0 {
			n++
		}
	}
	return n
}

// ownBlocks is the request's blocks beyond its hashed ones: ceil(prompt
// tokens / 16) − hashed blocks.
func ownBlocks(job scoring.Job) int {
	return max((job.PromptTokens+blockTokens-1)/blockTokens-len(job.Blocks), 0)
}

// cache assumes blocks cached on worker until at (a block routed again
// gets the later expiry).
func (s *prefixOverlapMinCost) cache(worker string, blocks []uint64, at int64) {
	if len(blocks) == 0 {
		return
	}
	m := s.cached[worker]
	if m == nil {
		m = map[uint64]int64{}
		s.cached[worker] = m
	}
	for _, b := range blocks {
		if _, ok := m[b]; !ok {
			s.queue = append(s.queue, expiry{worker, b, at})
			s.size++
		}
		m[b] = at
	}
	if s.size > s.maxEntries {
		s.prune(int(float64(s.maxEntries) * dynPruneRatio))
	}
}

// expire drops the entries whose time is up.
func (s *prefixOverlapMinCost) expire(now int64) {
	for s.head < len(s.queue) && s.queue[s.head].at <= now {
		s.pop()
	}
	s.compact()
}

// prune drops the entries that expire first until target remain.
func (s *prefixOverlapMinCost) prune(target int) {
	for s.size > target && s.head < len(s.queue) {
		s.pop()
	}
	s.compact()
}

// pop consumes the queue's head: the entry is dropped, unless it was routed
// again since, in which case it is queued again at its new expiry. Each
// entry has one queue record, so the queue is as long as the index.
func (s *prefixOverlapMinCost) pop() {
	e := s.queue[s.head]
	s.head++
	m := s.cached[e.worker]
	at, ok := m[e.block]
	switch {
	case !ok:
	case at == e.at:
		delete(m, e.block)
		s.size--
		if len(m) == 0 {
			delete(s.cached, e.worker)
		}
	default:
		s.queue = append(s.queue, expiry{e.worker, e.block, at})
	}
}

func (s *prefixOverlapMinCost) compact() {
	if s.head > 1024 && s.head > len(s.queue)/2 {
		s.queue = append(s.queue[:0], s.queue[s.head:]...)
		s.head = 0
	}
}
