// Package prefix cuts a prompt into chained block hashes, the unit in which
// prefix (KV) caches are shared: vLLM caches full blocks of 16 tokens, each
// identified by its own tokens and every token before it.
//
// There is no tokenizer here, by design: the router must not depend on one
// model's vocabulary, and the simulated GPUs must agree with the router
// without one. A token is taken to be BytesPerToken bytes of the request's
// prompt as it appears in the JSON body, so a block is BlockBytes bytes.
// What is hashed is fixed and documented so that every reader of a body
// (the router, gpusim, the benchmark's offline replays) derives the same
// blocks from the same bytes:
//
//   - chat: for each message in order, the raw JSON value of "role" and then
//     the raw JSON value of "content", as sent (quotes and escapes included);
//   - completions: the raw JSON value of "prompt".
//
// Two requests whose streams share their first k·BlockBytes bytes share
// their first k block hashes; the partial block at the end is never hashed,
// as vLLM never caches a partial block.
//
// The package sits under scoring because a block is the unit of the prefix
// term (scoring.Job.Blocks): extproc cuts a request's blocks here, the
// store indexes them, and the emulations and gpusim cut the same ones, all
// importing downwards. Like scoring it does no I/O; unlike scoring's root
// it uses one module besides the standard library (xxhash).
package prefix

import "github.com/cespare/xxhash/v2"

// Units of the estimate.
const (
	// BytesPerToken is the prompt bytes counted as one token (the usual
	// rule of thumb for English text and BPE tokenizers).
	BytesPerToken = 4
	// BlockTokens is vLLM's default KV block size.
	BlockTokens = 16
	// BlockBytes is the bytes of prompt text in one block.
	BlockBytes = BlockTokens * BytesPerToken
)

// Hasher accumulates a prompt stream and records one chained hash per full
// block. The zero value is ready to use and unbounded.
type Hasher struct {
	// Max bounds the blocks recorded (0: no bound); bytes beyond it are
	// counted but not hashed, so a huge prompt costs no more than Max blocks.
	Max    int
	buf    [8 + BlockBytes]byte // previous hash, then the block's bytes
	n      int                  // bytes of the current block so far
	total  int
	blocks []uint64
}

// Write adds p to the stream.
func (h *Hasher) Write(p []byte) {
	h.total += len(p)
	for len(p) > 0 && h.open() {
		c := copy(h.buf[8+h.n:], p)
		p = p[c:]
		h.filled(c)
	}
}

// WriteString adds s to the stream without copying it first, so hashing a
// field sliced from a parsed body allocates nothing. (Not generic over
// Write: a generic body hides the Hasher from escape analysis and moves
// every caller's Hasher to the heap.)
func (h *Hasher) WriteString(s string) {
	h.total += len(s)
	for len(s) > 0 && h.open() {
		c := copy(h.buf[8+h.n:], s)
		s = s[c:]
		h.filled(c)
	}
}

func (h *Hasher) open() bool { return h.Max <= 0 || len(h.blocks) < h.Max }

// filled accounts for c bytes copied into the block buffer and hashes the
// block once it is full.
func (h *Hasher) filled(c int) {
	h.n += c
	if h.n < BlockBytes {
		return
	}
	sum := xxhash.Sum64(h.buf[:])
	h.blocks = append(h.blocks, sum)
	for i := range 8 {
		h.buf[i] = byte(sum >> (8 * i))
	}
	h.n = 0
}

// Grow reserves room for the blocks of n more bytes (within Max), so a
// caller that knows the prompt's size appends its blocks in one allocation.
func (h *Hasher) Grow(n int) {
	want := len(h.blocks) + (h.n+n)/BlockBytes
	if h.Max > 0 {
		want = min(want, h.Max)
	}
	if want > cap(h.blocks) {
		h.blocks = append(make([]uint64, 0, want), h.blocks...)
	}
}

// Blocks returns the hashes of the full blocks so far, in order. The slice
// is the Hasher's own; it is valid until the next Write.
func (h *Hasher) Blocks() []uint64 { return h.blocks }

// Bytes is the length of the stream so far, hashed or not.
func (h *Hasher) Bytes() int { return h.total }

// Tokens is the stream's token estimate (at least 1 for a non-empty stream).
func (h *Hasher) Tokens() int { return Tokens(h.total) }

// Tokens is the token estimate of n prompt bytes (at least 1 when n > 0).
func Tokens(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/BytesPerToken)
}

// Match is the number of leading blocks a and b share.
func Match(a, b []uint64) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// ForAdapter returns the blocks of a prompt run with LoRA adapter (a new
// slice; blocks unchanged when adapter is ""). vLLM keys its cached blocks
// by LoRA adapter as well as by tokens, so the same prompt under two
// adapters, or under an adapter and its base model, shares no block: each
// hash is mixed with the adapter's, as if the chain were seeded with it.
// A shared leading run of two prompts under one adapter is still shared.
func ForAdapter(adapter string, blocks []uint64) []uint64 {
	if adapter == "" || len(blocks) == 0 {
		return blocks
	}
	seed := xxhash.Sum64String(adapter)
	out := make([]uint64, len(blocks))
	var b [16]byte
	for i, h := range blocks {
		putUint64(b[:8], seed)
		putUint64(b[8:], h)
		out[i] = xxhash.Sum64(b[:])
	}
	return out
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
