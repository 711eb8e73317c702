package gpusim

// KVEventKind is what a KVEvent reports, as vLLM's KV cache events name it.
type KVEventKind uint8

// Kinds of KV event.
const (
	// KVBlockStored: blocks were registered in the prefix cache (vLLM's
	// BlockStored, one event for the blocks one sequence registered in
	// one step, in prompt order).
	KVBlockStored KVEventKind = iota + 1
	// KVBlockRemoved: cached blocks were evicted to make room (vLLM's
	// BlockRemoved).
	KVBlockRemoved
)

// KVEvent is one change to an engine's prefix cache, in the engine's
// block hashes (KVBlockTokens tokens each, chained as scoring/prefix
// chains them), so that an index fed by the events holds exactly the
// blocks the cache holds.
type KVEvent struct {
	Kind   KVEventKind
	Hashes []uint64
}

// kvEventLog collects a pool's events until they are taken.
type kvEventLog struct {
	events []KVEvent
}

func (l *kvEventLog) stored(h uint64) { l.add(KVBlockStored, h) }

func (l *kvEventLog) removed(h uint64) { l.add(KVBlockRemoved, h) }

// add appends h to the last event when it is of the same kind (one
// BlockStored for one sequence's blocks of one step, one BlockRemoved for
// one allocation's evictions), else starts an event. Merging two
// consecutive events of a kind changes nothing an index derives.
func (l *kvEventLog) add(kind KVEventKind, h uint64) {
	if n := len(l.events); n > 0 && l.events[n-1].Kind == kind {
		l.events[n-1].Hashes = append(l.events[n-1].Hashes, h)
		return
	}
	l.events = append(l.events, KVEvent{Kind: kind, Hashes: []uint64{h}})
}

// EnableKVEvents makes the engine record its prefix cache's events from
// now on, for TakeKVEvents; it reports false when the engine has no
// prefix cache (caching off), which publishes none. Events cost memory
// until taken, so only a caller that takes them should enable them.
func (st *Stepper) EnableKVEvents() bool {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	p, ok := st.e.pool.(*pagedPool)
	if !ok || !p.caching {
		return false
	}
	if p.events == nil {
		p.events = &kvEventLog{}
	}
	return true
}

// TakeKVEvents returns the events recorded since the last call, oldest
// first, as vLLM's publisher drains its queue; nil when none (or when
// EnableKVEvents was not called). The caller owns the slice.
func (st *Stepper) TakeKVEvents() []KVEvent {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	p, ok := st.e.pool.(*pagedPool)
	if !ok || p.events == nil || len(p.events.events) == 0 {
		return nil
	}
	out := p.events.events
	p.events.events = nil
	return out
}
