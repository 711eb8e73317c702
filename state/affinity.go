package state

import "math"

// Prefix affinity and token load: what a claim reads besides the in-flight
// count.
//
// The prefix index is kept per worker: the chained block hashes of the
// prompts claimed on it (routing history, not engine truth), bounded by the
// worker's KV capacity in blocks and evicting the least recently used. The
// index "block hash → workers that were sent it" is the union of these
// per-worker sets; keeping one set per worker makes the bound, the eviction
// and the removal of a restarted worker's entries one operation each.
//
// Blocks of one prompt are chained: block i's hash covers every byte before
// it. A claim records a prompt's blocks so that earlier blocks are always at
// least as recent as later ones, so the evicting order removes a prompt's
// tail first and a worker's set always holds a leading run of any chain it
// holds part of. The match length (leading blocks held) is therefore found
// by a binary search, log₂(n) lookups per candidate: Redis CPU per claim
// stays bounded for long prompts.
//
// The index keeps one entry per IndexStride blocks, the hash of each
// group's last block, which by chaining stands for every block before it.
// Matches are found to within a group (64 tokens); the record, which
// dominates the claim's cost, touches a quarter of the entries.

// BlockTokens is the tokens of one prompt block (scoring/prefix.BlockTokens;
// a test keeps them equal). It turns a match in blocks into cached tokens.
const BlockTokens = 16

// IndexStride is the blocks per prefix-index entry.
const IndexStride = 4

// DefaultKVBlocks bounds the prefix index of a worker whose spec gives no
// kv_blocks: 4096 blocks of 16 tokens, the 65,536-token KV cache of gpusim's
// default profile. An index larger than the engine's cache claims hits the
// engine evicted long ago; a smaller one forgets hits it still has.
const DefaultKVBlocks = 4096

// Affinity is what a claim tells the store about the request for prefix
// affinity and token load. The zero value asks for neither.
type Affinity struct {
	// Blocks are the prompt's chained block hashes (scoring/prefix); the
	// store matches them against each candidate's index and records them
	// for the winner. Nil: no prefix lookup and nothing recorded.
	Blocks []uint64
	// PromptTokens is the prompt's token estimate; the uncached part
	// (PromptTokens − BlockTokens·match, at least 0) counts as in-flight
	// prefill on the winner until the claim ends.
	PromptTokens int
	// DecodeTokens is the expected output (max_tokens, or a default),
	// counted as in-flight decode on the winner until the claim ends.
	DecodeTokens int
}

// Uncached is the prompt tokens not covered by match leading blocks.
func (a Affinity) Uncached(match int) int {
	return max(0, a.PromptTokens-BlockTokens*match)
}

// Need is the tokens a claim with match leading blocks held holds on its
// worker (uncached prompt and max_tokens), as a token limit counts them.
func (a Affinity) Need(match int) int {
	return a.Uncached(match) + max(0, a.DecodeTokens)
}

// FullMatch is the longest match the prompt's blocks allow.
func (a Affinity) FullMatch() int { return IndexStride * (len(a.Blocks) / IndexStride) }

// Live are the figures a claim read for one candidate besides its
// in-flight count: how many leading blocks of the prompt its index holds,
// and its in-flight prefill and decode tokens (all replicas).
type Live struct {
	Match   int
	Prefill int
	Decode  int
	// Unread: the match was not looked up, because even a full match
	// could not have made the candidate win (see AffinityBounds); Match
	// is then 0.
	Unread bool
}

// AffinityScore is the part of a candidate's score that depends on the
// live prefix match and token load, added to its curve:
//
//	Prefix·(1 − trust·match/len(blocks)) + TokenLoad·(prefill + decode + uncached)
//
// (trust: PrefixTrust)
// where a worker whose in-flight prefill plus this request's uncached
// tokens exceed PrefillLimit (> 0) is scored as if it held no match
// ("sticky until saturated": affinity yields to load). With no blocks the
// prefix part is 0 for every candidate.
func (c Candidate) AffinityScore(a Affinity, l Live) float64 {
	match := l.Match
	if c.PrefillLimit > 0 && float64(l.Prefill+a.Uncached(match)) > c.PrefillLimit {
		match = 0
	}
	s := c.TokenLoad * float64(l.Prefill+l.Decode+a.Uncached(match))
	if n := len(a.Blocks); n > 0 {
		s += c.Prefix * (1 - c.Trust()*float64(match)/float64(n))
	}
	return s
}

// AffinityBounds are the least and the most AffinityScore can be for any
// match of a's prompt, given the candidate's live token load: a full match
// of the indexed groups (the load guard may void it) and none. A claim
// looks up the match of only those candidates whose curve plus lo is not
// above the lowest curve plus hi of all: the others cannot win, nor tie,
// whatever their index holds, so skipping them changes no choice and
// saves the store most of the lookups on a loaded fleet. The bound holds
// for non-negative weights; with a negative one, lo and hi are infinite
// and nothing is skipped.
func (c Candidate) AffinityBounds(a Affinity, prefill, decode int) (lo, hi float64) {
	if c.Prefix < 0 || c.TokenLoad < 0 {
		return math.Inf(-1), math.Inf(1)
	}
	lo = c.AffinityScore(a, Live{Match: a.FullMatch(), Prefill: prefill, Decode: decode})
	hi = c.AffinityScore(a, Live{Prefill: prefill, Decode: decode})
	return lo, hi
}

// Trust is the factor on the match the prefix part counts: PrefixTrust,
// or 1 when it is unset or out of 0..1.
func (c Candidate) Trust() float64 {
	if c.PrefixTrust <= 0 || c.PrefixTrust > 1 {
		return 1
	}
	return c.PrefixTrust
}

// IndexBound is the candidate's prefix-index bound in blocks: KVBlocks, or
// DefaultKVBlocks when unset.
func (c Candidate) IndexBound() int {
	if c.KVBlocks > 0 {
		return c.KVBlocks
	}
	return DefaultKVBlocks
}
