package gpusim

import (
	"errors"
	"fmt"
	"time"
)

// Stepper is one calibrated engine in virtual time, advanced by its caller
// rather than by a loop of its own, so that many engines can share one
// event queue (a fleet simulator). It is the engine Simulate runs (the same
// batching, chunked prefill, paged KV, prefix cache and step times); only
// who decides when a step ends differs. The caller keeps the clock:
//
//	at, ok := st.Plan(now)   // start a step if there is work; it ends at at
//	...                      // other engines' events before at
//	progress := st.Advance(at) // apply the step; then Plan(at) again
//
// A forward pass cannot be interrupted, so a request submitted while a
// step is in flight joins the waiting queue and is considered at the next
// Plan, as in Simulate. A Stepper is not safe for concurrent use.
type Stepper struct {
	e        *Engine
	clk      *virtualClock
	model    string
	tags     map[*seq]int
	progress []Progress
	inFlight bool
}

// Progress is what one step did for one request: its first token, its
// last, or both. Requests that only emitted a middle token are not
// reported.
type Progress struct {
	// Tag is the caller's id of the request, given to Submit.
	Tag int
	At  time.Duration
	// First: the request's first token was emitted at At. CachedTokens
	// are then the prompt tokens its first admission found in the prefix
	// cache.
	First        bool
	CachedTokens int
	// Done: the request's last token was emitted at At; Tokens is how
	// many it generated.
	Done   bool
	Tokens int
	// Gaps are, when Done, the request's engine-clock gaps between
	// consecutive tokens, recorded only when the engine records token
	// times (Config.StreamSummary); nil otherwise.
	Gaps []time.Duration
}

// NewStepper builds the engine cfg describes; cfg must be calibrated
// (Profile set), as only calibrated engines step on their own timeline.
// The first model of cfg serves every request.
func NewStepper(cfg Config) (*Stepper, error) {
	if !cfg.Calibrated() {
		return nil, errors.New("stepper: a calibrated profile is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "sim"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clk := &virtualClock{}
	e, err := newEngine(cfg, clk)
	if err != nil {
		return nil, err
	}
	st := &Stepper{e: e, clk: clk, model: cfg.Models[0], tags: map[*seq]int{}}
	e.onEmit = st.record
	return st, nil
}

func (st *Stepper) record(s *seq, now time.Duration) {
	tag, ok := st.tags[s]
	if !ok {
		return
	}
	first := s.emittedN == 1 // a calibrated engine emits one token a step
	done := s.state == stateDone
	if !first && !done {
		return
	}
	p := Progress{Tag: tag, At: now, First: first, Done: done, Tokens: s.emittedN}
	if first {
		p.CachedTokens = s.firstCached
	}
	if done {
		delete(st.tags, s)
		for k := 1; k < len(s.tokenTimes); k++ {
			p.Gaps = append(p.Gaps, s.tokenTimes[k]-s.tokenTimes[k-1])
		}
	}
	st.progress = append(st.progress, p)
}

// Submit queues r, arrived at now (r.Arrival is ignored), under the
// caller's tag. It fails with ErrContextTooLong when r could never fit
// the KV cache, and with ErrBadRequest for token counts below 1.
func (st *Stepper) Submit(tag int, r SimRequest, now time.Duration) error {
	return st.SubmitModel(tag, st.model, r, now)
}

// SubmitModel is Submit for a named model: the engine's first model or one
// of its LoRA adapters (Config.LoRAModules).
func (st *Stepper) SubmitModel(tag int, model string, r SimRequest, now time.Duration) error {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	st.clk.t = now
	s, err := st.e.submitLocked(Request{
		Model: model, PromptTokens: r.PromptTokens, MaxTokens: r.OutputTokens, Blocks: r.Blocks,
		RemotePrefill: r.RemotePrefill,
	}, now)
	if err != nil {
		return fmt.Errorf("submit %d: %w", tag, err)
	}
	st.tags[s.s] = tag
	return nil
}

// Busy reports whether a step is in flight (planned and not yet advanced).
func (st *Stepper) Busy() bool { return st.inFlight }

// Plan starts the next step at now if there is work and no step is in
// flight, and returns when it ends; ok is false when there is nothing to
// do (or a step is already in flight).
func (st *Stepper) Plan(now time.Duration) (at time.Duration, ok bool) {
	if st.inFlight {
		return 0, false
	}
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	st.clk.t = now
	wait, ok := st.e.sched.plan(now)
	if !ok {
		return 0, false
	}
	st.inFlight = true
	return now + wait, true
}

// Advance applies the step in flight at its end, at (the time Plan
// returned), and returns the requests it made progress on. The slice is
// reused by the next call.
func (st *Stepper) Advance(at time.Duration) []Progress {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	st.progress = st.progress[:0]
	if !st.inFlight {
		return st.progress
	}
	st.inFlight = false
	st.clk.t = at
	st.e.sched.advance(at)
	return st.progress
}

// State is the engine's state now: its queue, batch, KV use and prefix
// cache counters, as its /metrics would show them when scraped.
func (st *Stepper) State() State {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	return st.e.stateLocked()
}

// Cached is how many tokens of a prompt of promptTokens with these block
// hashes the engine's prefix cache would serve now: its longest cached run
// of leading blocks, at most CacheableBlocks. It changes nothing.
func (st *Stepper) Cached(promptTokens int, blocks []uint64) int {
	st.e.mu.Lock()
	defer st.e.mu.Unlock()
	p, ok := st.e.pool.(*pagedPool)
	if !ok || !st.e.prefix || !p.caching {
		return 0
	}
	n := 0
	for _, h := range blocks[:CacheableBlocks(promptTokens, len(blocks))] {
		if _, ok := p.table[h]; !ok {
			break
		}
		n++
	}
	return n * p.blockSize
}
