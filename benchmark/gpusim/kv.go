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
	// admit reserves room for the first step of waiting s, computing at
	// most budget tokens. A pool with a prefix cache first shares the
	// longest run of s's leading prompt blocks it holds and counts them
	// computed. It returns the tokens left to compute in the step, or
	// false, changing nothing, when that does not fit.
	admit(s *seq, budget int) (n int, ok bool)
	// computed tells the pool that s.computed grew, so that a caching
	// pool registers the prompt blocks now full.
	computed(s *seq)
	// cachedBlocks is the number of blocks registered in the prefix cache
	// (in use or not); 0 for a pool without one.
	cachedBlocks() int
}

// admitPlain is admit for a pool without a prefix cache.
func admitPlain(p kvPool, s *seq, budget int) (int, bool) {
	n := min(s.target-s.computed, budget)
	return n, p.reserve(s, s.computed+n)
}

var (
	_ kvPool = (*pagedPool)(nil)
	_ kvPool = (*reservedPool)(nil)
	_ kvPool = (*nominalPool)(nil)
)

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

func (p *reservedPool) used() int                            { return p.ctx }
func (p *reservedPool) capacity() int                        { return p.cap }
func (p *reservedPool) admit(s *seq, budget int) (int, bool) { return admitPlain(p, s, budget) }
func (p *reservedPool) computed(*seq)                        {}
func (p *reservedPool) cachedBlocks() int                    { return 0 }

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

func (p *nominalPool) used() int                            { return p.ctx }
func (p *nominalPool) capacity() int                        { return p.cap }
func (p *nominalPool) fits(prompt, _ int) bool              { return true }
func (p *nominalPool) admit(s *seq, budget int) (int, bool) { return admitPlain(p, s, budget) }
func (p *nominalPool) computed(*seq)                        {}

// cachedBlocks is 0: simple mode's prefix cache is the engine's
// PrefixCache, apart from this pool, which limits nothing.
func (p *nominalPool) cachedBlocks() int { return 0 }
