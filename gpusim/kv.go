package gpusim

// kvPool accounts for the KV cache. It never lets the tokens held exceed its
// capacity: reserve fails instead, and the caller waits or preempts.
type kvPool interface {
	// reserve makes s hold room for tokens KV tokens. It returns false, and
	// changes nothing, when that does not fit.
	reserve(s *seq, tokens int) bool
	// release frees everything s holds.
	release(s *seq)
	// used is the number of KV tokens counted as in use.
	used() int
	// capacity is the number of KV tokens the pool has.
	capacity() int
	// fits reports whether a request could ever run, alone on the GPU.
	fits(prompt, maxTokens int) bool
}

var (
	_ kvPool = (*pagedPool)(nil)
	_ kvPool = (*reservedPool)(nil)
	_ kvPool = (*nominalPool)(nil)
)

// pagedPool is vLLM's paged KV cache: blocks of blockSize tokens allocated
// as a sequence's context grows, so memory is not held for tokens not yet
// generated and running out mid-decode forces a preemption.
type pagedPool struct {
	blockSize   int
	totalBlocks int
	usedBlocks  int
}

func newPagedPool(capacityTokens, blockSize int) *pagedPool {
	return &pagedPool{blockSize: blockSize, totalBlocks: capacityTokens / blockSize}
}

func (p *pagedPool) blocksFor(tokens int) int { return (tokens + p.blockSize - 1) / p.blockSize }

func (p *pagedPool) reserve(s *seq, tokens int) bool {
	need := p.blocksFor(tokens) - s.blocks
	if need <= 0 {
		return true
	}
	if p.usedBlocks+need > p.totalBlocks {
		return false
	}
	p.usedBlocks += need
	s.blocks += need
	return true
}

func (p *pagedPool) release(s *seq) {
	p.usedBlocks -= s.blocks
	s.blocks = 0
}

func (p *pagedPool) used() int     { return p.usedBlocks * p.blockSize }
func (p *pagedPool) capacity() int { return p.totalBlocks * p.blockSize }

func (p *pagedPool) fits(prompt, maxTokens int) bool {
	return p.blocksFor(prompt+maxTokens) <= p.totalBlocks
}

// reservedPool is llama.cpp's: each running request holds a slot of perSeq
// context tokens from admission to the end, so it never runs out. used
// counts the context tokens actually present.
type reservedPool struct {
	perSeq   int
	cap      int
	reserved int
	ctx      int
}

func (p *reservedPool) reserve(s *seq, tokens int) bool {
	if s.held == 0 {
		b := p.perSeq
		if p.reserved+b > p.cap {
			return false
		}
		p.reserved += b
		s.held = b
	}
	p.ctx += tokens - s.ctxTokens
	s.ctxTokens = tokens
	return true
}

func (p *reservedPool) release(s *seq) {
	p.reserved -= s.held
	p.ctx -= s.ctxTokens
	s.held, s.ctxTokens = 0, 0
}

func (p *reservedPool) used() int     { return p.ctx }
func (p *reservedPool) capacity() int { return p.cap }

func (p *reservedPool) fits(prompt, maxTokens int) bool {
	return prompt+maxTokens <= p.perSeq && p.perSeq <= p.cap
}

// nominalPool is simple mode's: it limits nothing (max_concurrency does)
// and counts the context tokens of the running requests against a nominal
// capacity, so the usage it reports can pass 1 under overload; State.KVUsage
// saturates it at 1 as a real server's would.
type nominalPool struct {
	cap int
	ctx int
}

func (p *nominalPool) reserve(s *seq, tokens int) bool {
	p.ctx += tokens - s.ctxTokens
	s.ctxTokens = tokens
	return true
}

func (p *nominalPool) release(s *seq) {
	p.ctx -= s.ctxTokens
	s.ctxTokens = 0
}

func (p *nominalPool) used() int               { return p.ctx }
func (p *nominalPool) capacity() int           { return p.cap }
func (p *nominalPool) fits(prompt, _ int) bool { return true }
