package gpusim

import (
	"context"
	"sync/atomic"
	"time"
)

type seqState uint8

const (
	stateWaiting seqState = iota
	stateRunning
	stateDone
	stateCancelled
)

// seq is one request inside the engine. Fields above the line are guarded
// by Engine.mu; the atomics below are what its client reads.
type seq struct {
	id    uint64
	model string
	// adapter is the LoRA adapter the request names ("" for the base
	// model); loraHeld is whether it holds the adapter's slot (running),
	// loraLoad whether its admission loaded the adapter.
	adapter            string
	loraHeld, loraLoad bool
	stats              *modelStats
	stopReason         string
	prompt             int
	maxTokens          int
	// hashes are the prompt's block hashes a prefix cache may serve
	// (CacheableBlocks); nil when caching is off.
	hashes []uint64

	state     seqState
	scheduled bool
	// target is the number of tokens to (re)compute before the next token:
	// the prompt, plus the tokens already sent after a preemption.
	target   int
	computed int // tokens whose KV is in the cache
	emittedN int // tokens sent to the client
	blocks   int // paged KV blocks held, shared ones included
	// kv are the registered blocks s holds a reference on, in block
	// order; nextBlock is the next prompt block to register (pagedPool).
	kv        []*kvBlock
	nextBlock int
	// cachedTokens are the prompt tokens found in the prefix cache at
	// the latest admission, firstCached at the first.
	cachedTokens, firstCached int
	held                      int // reserved KV tokens (reservedPool)
	// ctxTokens is the context counted by reservedPool.
	ctxTokens   int
	slot        int
	nextAt      time.Duration // simple mode: when the next token is due
	preemptions int
	// remote: the prompt's KV is loaded from a prefill worker; loading:
	// its blocks are reserved and the load ends at loadedAt (disagg.go).
	remote, loading bool
	loadedAt        time.Duration

	arrival, admittedAt, firstTokenAt, lastTokenAt, doneAt time.Duration
	// tokenTimes are the emission times of the tokens, when recorded.
	tokenTimes []time.Duration

	emitted  atomic.Int64
	finished atomic.Bool
	notify   chan struct{}
}

func (s *seq) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Stream is a client's handle on a submitted request.
type Stream struct {
	e    *Engine
	s    *seq
	seen int
}

// Next blocks until tokens beyond those already returned are generated, or
// the request is done, and returns how many new tokens there are. done is
// true once every token has been returned. The error is ctx's.
func (st *Stream) Next(ctx context.Context) (n int, done bool, err error) {
	for {
		total := int(st.s.emitted.Load())
		fin := st.s.finished.Load()
		if total > st.seen || fin {
			n, st.seen = total-st.seen, total
			return n, fin && total == st.s.maxTokens, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-st.s.notify:
		}
	}
}

// TokenGaps returns the engine-clock gaps between consecutive tokens
// emitted so far (one fewer than the tokens). It is nil unless the engine
// records token times (Config.StreamSummary).
func (st *Stream) TokenGaps() []time.Duration {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	tt := st.s.tokenTimes
	if tt == nil {
		return nil
	}
	gaps := make([]time.Duration, max(0, len(tt)-1))
	for i := range gaps {
		gaps[i] = tt[i+1] - tt[i]
	}
	return gaps
}

// Close releases the request's slot and KV at once if it is not finished.
// It is safe to call more than once.
func (st *Stream) Close() { st.e.cancel(st.s) }
