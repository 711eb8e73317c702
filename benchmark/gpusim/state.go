package gpusim

import (
	"fmt"
	"sort"
)

// State is the engine's live state, as /admin/state reports it.
type State struct {
	Running          int    `json:"running"`
	Waiting          int    `json:"waiting"`
	KVUsedTokens     int    `json:"kv_used_tokens"`
	KVCapacityTokens int    `json:"kv_capacity_tokens"`
	Preemptions      uint64 `json:"preemptions"`
	Completed        uint64 `json:"completed"`
	// PrefixCacheQueries and PrefixCacheHits are prompt tokens looked up
	// in and found in the prefix cache, counted once per request at its
	// first admission; CachedBlocks is the blocks the cache holds (in use
	// or free).
	PrefixCacheQueries uint64 `json:"prefix_cache_queries"`
	PrefixCacheHits    uint64 `json:"prefix_cache_hits"`
	CachedBlocks       int    `json:"cached_blocks"`
	// ServedTotal counts inference responses answered (any status); the
	// server fills it in.
	ServedTotal uint64 `json:"served_total"`
	// LoRA is the engine's adapters and slots; nil without LoRA.
	LoRA *LoRAState `json:"lora,omitempty"`
}

// KVUsage is the KV cache fraction in use, 0..1 (simple mode's nominal
// cache can be overfilled; the fraction saturates at 1).
func (s State) KVUsage() float64 {
	if s.KVCapacityTokens == 0 {
		return 0
	}
	return min(1, float64(s.KVUsedTokens)/float64(s.KVCapacityTokens))
}

// snapshot is a consistent copy of everything /metrics shows.
type snapshot struct {
	State
	models         []string // sorted
	perModel       map[string]modelStats
	busyPerStep    float64
	genThroughput  float64
	slotProcessing []bool // nil unless slots mode
	slotCtx        int
	// kvConnector: the engine has a KV link, so the vLLM formats show
	// the NIXL transfer figures.
	kvConnector bool
	// startedUnix is the server process's start (unix seconds; 0: not
	// shown): a scraper tells a restart by it.
	startedUnix float64
	// nowUnix is when the snapshot was taken (unix seconds; 0: unknown),
	// the value of vLLM's lora_requests_info.
	nowUnix float64
}

// State returns the engine's current state.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stateLocked()
}

func (e *Engine) stateLocked() State {
	var lora *LoRAState
	if e.lora != nil {
		lora = e.lora.state(e.waiting)
	}
	return State{
		LoRA:             lora,
		Running:          len(e.running),
		Waiting:          len(e.waiting),
		KVUsedTokens:     e.pool.used(),
		KVCapacityTokens: e.pool.capacity(),
		Preemptions:      e.preemptions,
		Completed:        e.completed,

		PrefixCacheQueries: e.prefixQueries,
		PrefixCacheHits:    e.prefixHits,
		CachedBlocks:       e.cachedBlocks(),
	}
}

func (e *Engine) cachedBlocks() int {
	if e.simpleCache != nil {
		return e.simpleCache.Len()
	}
	return e.pool.cachedBlocks()
}

func (e *Engine) snapshot() snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	sn := snapshot{
		State:         e.stateLocked(),
		perModel:      make(map[string]modelStats, len(e.models)),
		genThroughput: e.gen.rate(now),
		slotCtx:       e.slotSize,
		kvConnector:   e.link.on(),
	}
	if e.steps > 0 {
		sn.busyPerStep = float64(e.busySum) / float64(e.steps)
	}
	for name, m := range e.models {
		sn.models = append(sn.models, name)
		c := m.clone()
		c.Running, c.Waiting = 0, 0
		sn.perModel[name] = c
	}
	sort.Strings(sn.models)
	for _, s := range e.running {
		c := sn.perModel[s.model]
		c.Running++
		sn.perModel[s.model] = c
	}
	for _, s := range e.waiting {
		c := sn.perModel[s.model]
		c.Waiting++
		sn.perModel[s.model] = c
	}
	if e.slots != nil {
		sn.slotProcessing = make([]bool, len(e.slots))
		for i, s := range e.slots {
			sn.slotProcessing[i] = s != nil
		}
	}
	return sn
}

// checkInvariants verifies the engine's bookkeeping; tests call it after
// every step of a virtual-time run.
func (e *Engine) checkInvariants() error {
	_, nominal := e.pool.(*nominalPool)
	if u, c := e.pool.used(), e.pool.capacity(); u < 0 || u > c && !nominal {
		return fmt.Errorf("kv used %d outside [0, capacity %d]", u, c)
	}
	if e.maxRun > 0 && len(e.running) > e.maxRun {
		return fmt.Errorf("%d running > limit %d", len(e.running), e.maxRun)
	}
	for _, s := range e.running {
		if s.state != stateRunning {
			return fmt.Errorf("seq %d in running with state %d", s.id, s.state)
		}
		if pp, ok := e.pool.(*pagedPool); ok && s.computed > s.blocks*pp.blockSize {
			return fmt.Errorf("seq %d computed %d tokens in %d blocks", s.id, s.computed, s.blocks)
		}
		if s.emittedN > s.maxTokens {
			return fmt.Errorf("seq %d emitted %d > %d", s.id, s.emittedN, s.maxTokens)
		}
	}
	if pp, ok := e.pool.(*pagedPool); ok {
		if err := pp.check(e.running); err != nil {
			return err
		}
	}
	if c := e.simpleCache; c != nil && c.Len() > c.capacity {
		return fmt.Errorf("simple prefix cache holds %d blocks > capacity %d", c.Len(), c.capacity)
	}
	for _, s := range e.waiting {
		if s.blocks != 0 || s.held != 0 || len(s.kv) != 0 {
			return fmt.Errorf("waiting seq %d holds kv", s.id)
		}
	}
	if e.lora != nil {
		return e.lora.check(e.running)
	}
	if e.slots != nil {
		busy := 0
		for _, s := range e.slots {
			if s != nil {
				busy++
			}
		}
		if busy != len(e.running) || busy > len(e.slots) {
			return fmt.Errorf("%d busy slots, %d running, %d slots", busy, len(e.running), len(e.slots))
		}
	}
	return nil
}
