package memory

import (
	"container/list"
	"context"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// The in-memory prefix index (see state/affinity.go for its shape and
// the ordering argument).

// strided returns the blocks the index keeps of a prompt: the last of
// each full group of IndexStride.
func strided(blocks []uint64) []uint64 {
	out := make([]uint64, len(blocks)/state.IndexStride)
	for j := range out {
		out[j] = blocks[state.IndexStride*j+state.IndexStride-1]
	}
	return out
}

// matchLen is the leading run of n chained blocks for which has is true,
// by binary search: has is monotone (true then false) on a chain, as the
// recording order guarantees. Block 0 is tried first: a cold worker costs
// one lookup.
func matchLen(n int, has func(i int) bool) int {
	if n == 0 || !has(0) {
		return 0
	}
	lo, hi := 1, n // has(lo-1) is true; the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if has(mid - 1) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// lruIndex is one worker's prefix index in memory: block hashes, most
// recently recorded at the front.
type lruIndex struct {
	order *list.List // of uint64, front: most recent
	at    map[uint64]*list.Element
}

func newLRUIndex() *lruIndex {
	return &lruIndex{order: list.New(), at: map[uint64]*list.Element{}}
}

func (x *lruIndex) has(h uint64) bool { _, ok := x.at[h]; return ok }

// record makes blocks the most recent entries, earlier blocks more recent
// than later ones (see the ordering argument above), then evicts the least
// recent beyond bound.
func (x *lruIndex) record(blocks []uint64, bound int) {
	for i := len(blocks) - 1; i >= 0; i-- {
		h := blocks[i]
		if e, ok := x.at[h]; ok {
			x.order.MoveToFront(e)
			continue
		}
		x.at[h] = x.order.PushFront(h)
	}
	for x.order.Len() > bound {
		e := x.order.Back()
		delete(x.at, e.Value.(uint64))
		x.order.Remove(e)
	}
}

func (x *lruIndex) len() int { return x.order.Len() }

// claimTokens are the tokens a held claim (or a queued waiter, whose tokens
// apply when it is granted) counts on its worker: ahead is the part of
// prefill still counted as prefill ahead (until the first token).
type claimTokens struct {
	prefill, decode, ahead int
}

func (t claimTokens) need() int { return t.prefill + t.decode }

// The in-memory store's side of affinity: a worker's match, token room
// and index record (see Store.Claim).

// live reads the worker's prefix match for blocks and its token load.
func (w *memWorker) live(blocks []uint64) scoring.Live {
	l := w.load()
	if w.index != nil {
		groups := len(blocks) / state.IndexStride
		l.Match = state.IndexStride * matchLen(groups, func(j int) bool { return w.index.has(blocks[state.IndexStride*j+state.IndexStride-1]) })
	}
	return l
}

// load is the worker's token load, with no match read.
func (w *memWorker) load() scoring.Live {
	return scoring.Live{Prefill: w.PrefillTokens, Decode: w.DecodeTokens, Ahead: w.AheadTokens}
}

// addTokens adds (or with sign -1, gives back) t to the worker's counts.
func (w *memWorker) addTokens(t claimTokens, sign int) {
	w.PrefillTokens = max(0, w.PrefillTokens+sign*t.prefill)
	w.DecodeTokens = max(0, w.DecodeTokens+sign*t.decode)
	w.AheadTokens = max(0, w.AheadTokens+sign*t.ahead)
}

// tokenRoom: the worker's learned token limit admits need more tokens.
func (w *memWorker) tokenRoom(need int) bool {
	return w.Limit.TokenRoom(w.InFlight, w.PrefillTokens+w.DecodeTokens, need)
}

// recordBlocks makes blocks the most recent of the worker's index.
func (w *memWorker) recordBlocks(blocks []uint64, bound int) {
	if len(blocks) < state.IndexStride {
		return
	}
	if w.index == nil {
		w.index = newLRUIndex()
	}
	w.index.record(strided(blocks), max(1, bound/state.IndexStride))
}

// FirstToken stops counting claim id's uncached prompt as prefill ahead on
// its worker; only the first call counts, unknown claims are ignored.
func (m *Store) FirstToken(_ context.Context, id string) error {
	m.lock()
	defer m.unlock()
	c, ok := m.claims[id]
	if !ok || c.tok.ahead == 0 {
		return nil
	}
	if w, ok := m.workers[c.worker]; ok {
		w.AheadTokens = max(0, w.AheadTokens-c.tok.ahead)
	}
	c.tok.ahead = 0
	return nil
}
