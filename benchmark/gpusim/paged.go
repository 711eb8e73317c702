package gpusim

import "fmt"

// pagedPool is vLLM's paged KV cache: blocks of blockSize tokens allocated
// as a sequence's context grows, so memory is not held for tokens not yet
// generated and running out mid-decode forces a preemption.
//
// With caching on, it is also vLLM's automatic prefix cache. A full prompt
// block, once computed, is registered under its chained hash; sequences
// whose prompts start with the same blocks share them, each holding a
// reference. When no sequence holds a registered block any more it stays
// cached, on a free list in least-recently-freed order, until allocation
// needs its memory: new blocks come from empty memory first, then from the
// head of that list. Cached blocks are GPU memory: every block is either
// empty, cached and free, or held (ref > 0), and the three always add up
// to totalBlocks.
type pagedPool struct {
	blockSize   int
	totalBlocks int
	caching     bool
	inUse       int                 // blocks with ref > 0, private ones included
	table       map[uint64]*kvBlock // registered blocks by hash
	free        blockList           // registered blocks with ref 0, LRU first
	evictions   int                 // cached blocks reused for other data
	events      *kvEventLog         // nil: no KV events recorded
}

// kvBlock is a registered (hashed) block. Private blocks, those not
// registered, need no identity: a sequence only counts them.
type kvBlock struct {
	hash       uint64
	ref        int
	prev, next *kvBlock // on the free list while ref == 0
}

func newPagedPool(capacityTokens, blockSize int, caching bool) *pagedPool {
	return &pagedPool{
		blockSize: blockSize, totalBlocks: capacityTokens / blockSize,
		caching: caching, table: map[uint64]*kvBlock{},
	}
}

func (p *pagedPool) blocksFor(tokens int) int { return (tokens + p.blockSize - 1) / p.blockSize }

// empty is the blocks neither held nor cached.
func (p *pagedPool) empty() int { return p.totalBlocks - p.inUse - p.free.n }

func (p *pagedPool) reserve(s *seq, tokens int) bool {
	need := p.blocksFor(tokens) - s.blocks
	if need <= 0 {
		return true
	}
	if need > p.empty()+p.free.n {
		return false
	}
	// Empty memory first; then evict the least recently freed cached
	// blocks, which become private blocks of s.
	for evict := need - p.empty(); evict > 0; evict-- {
		b := p.free.popFront()
		delete(p.table, b.hash)
		p.evictions++
		if p.events != nil {
			p.events.removed(b.hash)
		}
	}
	p.inUse += need
	s.blocks += need
	return true
}

// admit shares the longest run of s's leading prompt blocks that is
// registered (held by others or free), then reserves the rest of the
// step. The fit check counts the matched blocks that are free, since
// taking them removes them from what allocation may evict.
func (p *pagedPool) admit(s *seq, budget int) (int, bool) {
	matched, matchedFree := 0, 0
	if p.caching {
		for _, h := range s.hashes {
			b, ok := p.table[h]
			if !ok {
				break
			}
			matched++
			if b.ref == 0 {
				matchedFree++
			}
		}
	}
	computed := matched * p.blockSize
	n := min(s.target-computed, budget)
	if p.blocksFor(computed+n)-matched > p.empty()+p.free.n-matchedFree {
		return 0, false
	}
	for _, h := range s.hashes[:matched] {
		b := p.table[h]
		if b.ref == 0 {
			p.free.remove(b)
			p.inUse++
		}
		b.ref++
		s.kv = append(s.kv, b)
	}
	s.blocks, s.nextBlock, s.computed = matched, matched, computed
	p.reserve(s, computed+n) // cannot fail: checked above
	return n, true
}

// computed registers s's prompt blocks that are now full. A block some
// other sequence registered meanwhile (both computed it at once) stays a
// private copy of s, as the cache keeps one block per hash.
func (p *pagedPool) computed(s *seq) {
	if !p.caching {
		return
	}
	full := min(len(s.hashes), s.computed/p.blockSize)
	for ; s.nextBlock < full; s.nextBlock++ {
		h := s.hashes[s.nextBlock]
		if _, ok := p.table[h]; ok {
			continue
		}
		b := &kvBlock{hash: h, ref: 1}
		p.table[h] = b
		if p.events != nil {
			p.events.stored(h)
		}
		s.kv = append(s.kv, b) // one of s's private blocks becomes this one
	}
}

// release drops s's references. Its registered blocks no longer held go to
// the free list last block first, so that a prompt's tail is evicted
// before its head (vLLM frees in reverse order for the same reason: a
// head is the likelier to be shared).
func (p *pagedPool) release(s *seq) {
	p.inUse -= s.blocks - len(s.kv) // private blocks
	for i := len(s.kv) - 1; i >= 0; i-- {
		b := s.kv[i]
		b.ref--
		if b.ref == 0 {
			p.inUse--
			p.free.pushBack(b)
		}
		s.kv[i] = nil
	}
	s.kv = s.kv[:0]
	s.blocks, s.nextBlock = 0, 0
}

// used counts the blocks held, as vLLM's KV usage does: cached blocks
// that nobody holds are free memory.
func (p *pagedPool) used() int         { return p.inUse * p.blockSize }
func (p *pagedPool) capacity() int     { return p.totalBlocks * p.blockSize }
func (p *pagedPool) cachedBlocks() int { return len(p.table) }

func (p *pagedPool) fits(prompt, maxTokens int) bool {
	return p.blocksFor(prompt+maxTokens) <= p.totalBlocks
}

// blockList is an intrusive doubly linked list of blocks.
type blockList struct {
	head, tail *kvBlock
	n          int
}

func (l *blockList) pushBack(b *kvBlock) {
	b.prev, b.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (l *blockList) remove(b *kvBlock) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.tail = b.prev
	}
	b.prev, b.next = nil, nil
	l.n--
}

func (l *blockList) popFront() *kvBlock {
	b := l.head
	l.remove(b)
	return b
}

// check verifies the pool's bookkeeping against the sequences holding
// blocks: held, cached-free and empty blocks add up to the capacity, never
// more; every registered block's references are the running sequences
// holding it; the free list is exactly the registered blocks nobody holds.
func (p *pagedPool) check(running []*seq) error {
	if p.inUse < 0 || p.free.n < 0 || p.empty() < 0 {
		return fmt.Errorf("blocks: %d held + %d cached free > capacity %d", p.inUse, p.free.n, p.totalBlocks)
	}
	refs := map[*kvBlock]int{}
	private := 0
	for _, s := range running {
		if len(s.kv) > s.blocks {
			return fmt.Errorf("seq %d holds %d registered of %d blocks", s.id, len(s.kv), s.blocks)
		}
		private += s.blocks - len(s.kv)
		for _, b := range s.kv {
			refs[b]++
		}
	}
	if held := private + len(refs); held != p.inUse {
		return fmt.Errorf("blocks held by sequences %d != pool in use %d", held, p.inUse)
	}
	free := 0
	for h, b := range p.table {
		if b.hash != h || b.ref != refs[b] {
			return fmt.Errorf("block %x: ref %d, held by %d sequences", h, b.ref, refs[b])
		}
		if b.ref == 0 {
			free++
		}
	}
	n := 0
	for b := p.free.head; b != nil; b = b.next {
		if b.ref != 0 || p.table[b.hash] != b {
			return fmt.Errorf("free list holds block %x with ref %d", b.hash, b.ref)
		}
		n++
	}
	if n != free || n != p.free.n {
		return fmt.Errorf("free list %d (counted %d), unreferenced registered blocks %d", n, p.free.n, free)
	}
	for b := range refs {
		if p.table[b.hash] != b {
			return fmt.Errorf("seq holds unregistered block %x", b.hash)
		}
	}
	return nil
}
