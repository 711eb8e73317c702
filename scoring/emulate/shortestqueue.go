package emulate

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/prefix"
)

// Defaults of the SGLang router's cache_aware policy, as its command line
// sets them (the library's own defaults differ; deployments use these).
const (
	sglCacheThreshold = 0.3
	sglBalanceAbs     = 64
	sglBalanceRel     = 1.5
	sglEvictEvery     = 120 * time.Second
	// sglMaxTreeChars is max_tree_size, in characters per worker; here in
	// blocks of prefix.BlockBytes characters.
	sglMaxTreeChars  = 1 << 26
	sglMaxTreeBlocks = sglMaxTreeChars / prefix.BlockBytes
)

// prefixMatchOrShortestQueue is prefix_match_or_shortest_queue, the SGLang
// router's cache_aware policy:
//
//  1. if the load is imbalanced (max − min running > 64 and max > 1.5 ×
//     min, running = this router's own in-flight requests per worker), the
//     worker with the fewest running;
//  2. else, if the best prefix match ratio exceeds 0.3, that worker;
//  3. else the worker with the fewest running, as in rule 1.
//
// Rule 3 follows the current gateway's code (sgl-model-gateway, now SMG:
// select_worker_with_text takes the minimum load below the threshold).
// Its header comment, and the SGLang router before it, took the worker
// with the smallest tree (the most room for new prefixes). The change
// moved the benchmark both ways (docs/benchmark.md, "Configurations").
//
// The request is then inserted into the chosen worker's tree, in every
// case. Every 120 s each tree larger than max_tree_size is cut down to it,
// least recently used entries first.
//
// Simplified: SGLang keeps one approximate radix tree of request text
// (characters) with a tenant per worker; here each worker has a set of the
// chained block hashes routed to it, each with its last use, and the match
// ratio is matched blocks / request blocks instead of matched characters /
// request characters. So a prompt shorter than one block (64 characters)
// matches nothing and goes by rule 3, and matches end at block boundaries.
// The eviction runs at the first decision after it is due rather than on a
// timer; no decision can see the difference.
type prefixMatchOrShortestQueue struct {
	// The eviction schedule (upstream defaults; tests shrink them).
	evictEvery    time.Duration
	maxTreeBlocks int

	mu        sync.Mutex
	trees     map[string]map[uint64]treeEntry // worker → routed blocks
	running   map[string]int                  // worker → in-flight requests routed here
	inflight  map[string]string               // claim id → worker
	nextEvict int64                           // unix nanos; 0: not yet scheduled
}

// treeEntry is a block's last use and depth: the eviction takes the
// oldest first and, among equally old, the deepest, as a radix tree evicts
// leaves before their parents.
type treeEntry struct {
	used  int64
	depth int32
}

var _ scoring.Strategy = (*prefixMatchOrShortestQueue)(nil)

func newPrefixMatchOrShortestQueue() *prefixMatchOrShortestQueue {
	return &prefixMatchOrShortestQueue{
		evictEvery: sglEvictEvery, maxTreeBlocks: sglMaxTreeBlocks,
		trees: map[string]map[uint64]treeEntry{}, running: map[string]int{}, inflight: map[string]string{},
	}
}

func (*prefixMatchOrShortestQueue) Name() string { return PrefixMatchOrShortestQueue }

// Plan ranks by the rule that applies: running (rules 1 and 3) or −match
// ratio (rule 2). Each candidate carries both terms, "imbalanced" and its
// tree's size in blocks; only the deciding term has a weight.
func (s *prefixMatchOrShortestQueue) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictIfDue(nanos(in.Now))
	blocks := in.Job.Blocks
	type view struct {
		running, tree int
		ratio         float64
	}
	views := make([]view, len(eligible))
	minRun, maxRun, best := 0, 0, 0.0
	for i, w := range eligible {
		v := view{running: s.running[w.ID], tree: len(s.trees[w.ID])}
		if len(blocks) > 0 {
			tree := s.trees[w.ID]
			v.ratio = float64(leading(blocks, func(b uint64) bool { _, ok := tree[b]; return ok })) / float64(len(blocks))
		}
		views[i] = v
		if i == 0 || v.running < minRun {
			minRun = v.running
		}
		maxRun = max(maxRun, v.running)
		best = max(best, v.ratio)
	}
	imbalanced := maxRun-minRun > sglBalanceAbs && float64(maxRun) > sglBalanceRel*float64(minRun)
	var wRun, wMatch float64
	if !imbalanced && best > sglCacheThreshold {
		wMatch = -1
	} else {
		wRun = 1
	}
	flag := 0.0
	if imbalanced {
		flag = 1
	}
	out := make([]scoring.Candidate, len(eligible))
	for i, w := range eligible {
		v := views[i]
		terms := []scoring.Term{
			{Name: "imbalanced", Value: flag},
			{Name: "running", Weight: wRun, Value: float64(v.running)},
			{Name: "prefix_match", Weight: wMatch, Value: v.ratio},
			{Name: "tree_blocks", Value: float64(v.tree)},
		}
		base := 0.0
		for _, t := range terms {
			base += t.Contribution()
		}
		out[i] = scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Base: base}, Terms: terms}
	}
	return out
}

// Claimed counts the request as running on worker and inserts its blocks
// into worker's tree.
func (s *prefixMatchOrShortestQueue) Claimed(id string, job scoring.Job, worker string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictIfDue(nanos(now))
	s.running[worker]++
	s.inflight[id] = worker
	if len(job.Blocks) == 0 {
		return
	}
	tree := s.trees[worker]
	if tree == nil {
		tree = make(map[uint64]treeEntry, len(job.Blocks))
		s.trees[worker] = tree
	}
	t := nanos(now)
	for i, b := range job.Blocks {
		tree[b] = treeEntry{used: t, depth: int32(i)}
	}
}

// Released ends the request's running count; its blocks stay in the tree.
func (s *prefixMatchOrShortestQueue) Released(id string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	worker, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	if s.running[worker]--; s.running[worker] <= 0 {
		delete(s.running, worker)
	}
}

// evictIfDue runs the periodic eviction when its time has come. The first
// call schedules it, as the router's eviction thread starts with it.
func (s *prefixMatchOrShortestQueue) evictIfDue(now int64) {
	switch {
	case s.nextEvict == 0:
		s.nextEvict = now + int64(s.evictEvery)
		return
	case now < s.nextEvict:
		return
	}
	s.nextEvict = now + int64(s.evictEvery)
	for _, tree := range s.trees {
		evictDownTo(tree, s.maxTreeBlocks)
	}
}

// evictDownTo removes tree's least recently used entries until it holds at
// most limit.
func evictDownTo(tree map[uint64]treeEntry, limit int) {
	if len(tree) <= limit {
		return
	}
	type kv struct {
		b uint64
		e treeEntry
	}
	all := make([]kv, 0, len(tree))
	for b, e := range tree {
		all = append(all, kv{b, e})
	}
	slices.SortFunc(all, func(x, y kv) int {
		if c := cmp.Compare(x.e.used, y.e.used); c != 0 {
			return c
		}
		return cmp.Compare(y.e.depth, x.e.depth)
	})
	for _, x := range all[:len(all)-limit] {
		delete(tree, x.b)
	}
}
