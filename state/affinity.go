package state

import "github.com/llm-router/llm-router/scoring"

// Prefix affinity and token load: what a claim reads besides the in-flight
// count, and scores with scoring.LiveScore (see scoring/live.go).
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
const BlockTokens = scoring.BlockTokens

// IndexStride is the blocks per prefix-index entry.
const IndexStride = 4

// DefaultKVBlocks bounds the prefix index of a worker whose spec gives no
// kv_blocks: 4096 blocks of 16 tokens, the 65,536-token KV cache of gpusim's
// default profile. An index larger than the engine's cache claims hits the
// engine evicted long ago; a smaller one forgets hits it still has.
const DefaultKVBlocks = 4096

// FullMatch is the longest match the index can find for p's blocks: whole
// groups of IndexStride.
func FullMatch(p scoring.Prompt) int { return IndexStride * (len(p.Blocks) / IndexStride) }

// IndexBound is the candidate's prefix-index bound in blocks: KVBlocks, or
// DefaultKVBlocks when unset.
func (c Candidate) IndexBound() int {
	if c.LiveWeights.KVBlocks > 0 {
		return c.LiveWeights.KVBlocks
	}
	return DefaultKVBlocks
}
