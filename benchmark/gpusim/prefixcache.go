package gpusim

import "github.com/llm-router/llm-router/scoring/prefix"

// KVBlockTokens is the size of a KV block and of a prefix-cache block in
// tokens (vLLM's default): only whole blocks are cached.
const KVBlockTokens = prefix.BlockTokens

// CacheableBlocks is how many of a prompt's leading block hashes a prefix
// cache may serve: at most (promptTokens-1)/KVBlockTokens, because vLLM
// always recomputes the prompt's last token (it needs its logits) and
// caches full blocks only; never more than the blocks hashed.
func CacheableBlocks(promptTokens, hashedBlocks int) int {
	if promptTokens < 1 {
		return 0
	}
	return max(0, min(hashedBlocks, (promptTokens-1)/KVBlockTokens))
}

// PrefixCache is a standalone model of a prefix (KV) cache: the blocks of
// the prompts seen, by chained block hash, evicted least recently used
// first. It counts queries and hits in tokens as vLLM does: a request
// queries its prompt tokens and hits KVBlockTokens per leading block found
// cached, within CacheableBlocks. It is the cache semantics gpusim's simple
// mode runs, and what an offline replay uses to compute the hit rate a
// trace allows (the paged KV pool of calibrated mode applies the same
// lookup and counting rules to blocks that are also GPU memory). It is not
// safe for concurrent use.
type PrefixCache struct {
	bounded  bool
	capacity int
	index    map[uint64]int32 // hash -> node (unused when unbounded)
	nodes    []lruNode        // nodes[0] is the list's sentinel
	freeNode []int32
	queries  uint64
	hits     uint64
}

// lruNode is a block in the recency list, linked by node index to keep the
// list compact (a trace replay holds millions of blocks).
type lruNode struct {
	hash       uint64
	prev, next int32
}

// NewPrefixCache returns an empty cache of capacityBlocks blocks; 0 means
// unbounded (nothing is ever evicted), as for a trace's ceiling hit rate.
func NewPrefixCache(capacityBlocks int) *PrefixCache {
	c := &PrefixCache{bounded: capacityBlocks > 0, capacity: capacityBlocks, index: map[uint64]int32{}}
	c.nodes = []lruNode{{}} // sentinel: next is the LRU end, prev the MRU end
	return c
}

// Access serves one request: it finds the longest leading run of blocks
// (within CacheableBlocks(promptTokens, len(blocks))) already cached,
// counts promptTokens queried and the found tokens hit, then caches all
// those blocks as most recently used. It returns the hit tokens. Blocks
// are touched last to first, so that under pressure a prompt's tail is
// evicted before its head, as vLLM frees a finished request's blocks.
func (c *PrefixCache) Access(blocks []uint64, promptTokens int) (hitTokens int) {
	n := CacheableBlocks(promptTokens, len(blocks))
	blocks = blocks[:n]
	hit := c.Match(blocks)
	c.queries += uint64(max(0, promptTokens))
	c.hits += uint64(hit * KVBlockTokens)
	if !c.bounded {
		blocks = blocks[hit:] // without eviction, recency does not matter
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		c.touch(blocks[i])
	}
	return hit * KVBlockTokens
}

// Match is the number of leading blocks cached; it changes nothing.
func (c *PrefixCache) Match(blocks []uint64) int {
	for i, h := range blocks {
		if _, ok := c.index[h]; !ok {
			return i
		}
	}
	return len(blocks)
}

// touch caches h as the most recently used block, evicting beyond capacity.
func (c *PrefixCache) touch(h uint64) {
	if !c.bounded {
		c.index[h] = 0 // nothing is evicted: no recency to keep
		return
	}
	if i, ok := c.index[h]; ok {
		c.unlink(i)
		c.pushMRU(i)
		return
	}
	var i int32
	if k := len(c.freeNode); k > 0 {
		i, c.freeNode = c.freeNode[k-1], c.freeNode[:k-1]
	} else {
		i = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{})
	}
	c.nodes[i].hash = h
	c.index[h] = i
	c.pushMRU(i)
	c.evict(c.capacity)
}

func (c *PrefixCache) unlink(i int32) {
	n := c.nodes[i]
	c.nodes[n.prev].next = n.next
	c.nodes[n.next].prev = n.prev
}

func (c *PrefixCache) pushMRU(i int32) {
	last := c.nodes[0].prev
	c.nodes[i].prev, c.nodes[i].next = last, 0
	c.nodes[last].next = i
	c.nodes[0].prev = i
}

// evict drops least recently used blocks until at most limit remain.
func (c *PrefixCache) evict(limit int) {
	for len(c.index) > limit {
		i := c.nodes[0].next
		c.unlink(i)
		delete(c.index, c.nodes[i].hash)
		c.freeNode = append(c.freeNode, i)
	}
}

// setCapacity changes a bounded cache's capacity, evicting what no longer
// fits; simple mode shrinks its cache to what the running requests leave
// free, possibly to nothing.
func (c *PrefixCache) setCapacity(blocks int) {
	if !c.bounded {
		return
	}
	c.capacity = max(0, blocks)
	c.evict(c.capacity)
}

// Len is the number of blocks cached.
func (c *PrefixCache) Len() int { return len(c.index) }

// Queries is the prompt tokens of every request served.
func (c *PrefixCache) Queries() uint64 { return c.queries }

// Hits is the prompt tokens found cached.
func (c *PrefixCache) Hits() uint64 { return c.hits }

// HitRate is Hits over Queries, 0 before any query.
func (c *PrefixCache) HitRate() float64 {
	if c.queries == 0 {
		return 0
	}
	return float64(c.hits) / float64(c.queries)
}
