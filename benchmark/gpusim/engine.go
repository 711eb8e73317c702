package gpusim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Request outcomes the engine reports; the HTTP layer maps them to statuses.
var (
	// ErrContextTooLong: the request could never fit the KV cache or slot.
	ErrContextTooLong = errors.New("request exceeds the available context size")
	// ErrBadRequest: the request's token counts are invalid.
	ErrBadRequest = errors.New("invalid request")
)

// blockSize is vLLM's default KV block size in tokens.
const blockSize = 16

// clock is the engine's source of time, as a duration since the engine
// started. The server uses the monotonic wall clock; Simulate a virtual
// clock that jumps from event to event.
type clock interface {
	Now() time.Duration
}

type realClock struct{ start time.Time }

func (c realClock) Now() time.Duration { return time.Since(c.start) }

type virtualClock struct{ t time.Duration }

var (
	_ clock = realClock{}
	_ clock = (*virtualClock)(nil)
)

func (c *virtualClock) Now() time.Duration { return c.t }

// scheduler is an engine's timing model. Time is a parameter, never read
// inside, so the same code runs in real and virtual time. Both methods run
// with Engine.mu held.
type scheduler interface {
	// plan admits work and returns how long until the next event; ok is
	// false when there is nothing to do until a request arrives.
	plan(now time.Duration) (wait time.Duration, ok bool)
	// advance applies the events due at now.
	advance(now time.Duration)
	// retime returns the new wait for the event planned last, after a
	// change of knobs.
	retime(now time.Duration) time.Duration
	// interruptible reports whether an arrival may cut a wait short (a
	// forward pass cannot be; per-stream timers can).
	interruptible() bool
}

var (
	_ scheduler = (*batchScheduler)(nil)
	_ scheduler = (*simpleScheduler)(nil)
)

// Knobs are the settings /admin/config changes at run time.
type Knobs struct {
	// Slowdown multiplies every step, TTFT and inter-token time.
	Slowdown float64 `json:"slowdown"`
	// ErrorRate is the fraction of inference requests answered 503.
	ErrorRate float64 `json:"error_rate"`
	// TTFTMs and TokensPerSecond are the simple-mode timing.
	TTFTMs          float64 `json:"ttft_ms"`
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// Request is one generation request as the engine sees it.
type Request struct {
	Model        string
	PromptTokens int
	// MaxTokens is exactly the number of tokens generated.
	MaxTokens int
	// StopReason is the finish reason reported at the end: "length" when
	// the client set a limit, "stop" otherwise.
	StopReason string
	// Blocks are the prompt's chained block hashes (scoring/prefix); the
	// prefix cache serves at most CacheableBlocks of them.
	Blocks []uint64
	// RemotePrefill: the prompt was prefilled on another worker, whose KV
	// this engine loads over its link instead of computing it (vLLM's
	// do_remote_prefill). Ignored by an engine without a KV link.
	RemotePrefill bool
}

// Engine simulates one GPU: a waiting queue, a running batch and a KV cache,
// advanced by one scheduler loop. It is safe for concurrent use.
type Engine struct {
	clock    clock
	maxRun   int // 0 = unlimited
	slotSize int // llama.cpp ctx-size per slot; 0 when not in slots mode
	wake     chan struct{}
	retimed  chan struct{} // knobs changed

	mu      sync.Mutex
	knobs   Knobs
	sched   scheduler
	pool    kvPool
	waiting []*seq // FIFO; preempted requests go back to the front
	running []*seq // in admission order; the last is the newest
	slots   []*seq // slot occupants in slots mode
	models  map[string]*modelStats
	// lora is the engine's adapters and GPU slots; nil without LoRA.
	lora *loraBank
	// prefix is whether prefix caching is on; simpleCache is simple
	// mode's cache (calibrated mode's is the paged pool).
	prefix      bool
	simpleCache *PrefixCache
	// recordTimes keeps each token's emission time (--stream-summary).
	recordTimes bool
	// prefixQueries and prefixHits count prompt tokens, once per request
	// at its first admission.
	prefixQueries uint64
	prefixHits    uint64
	preemptions   uint64
	completed     uint64
	steps         uint64 // forward passes (or token events in simple mode)
	busySum       uint64 // sum over steps of the sequences in the step
	gen           rateWindow
	nextID        uint64
	// onEmit, when set, is told of every emission after it is applied
	// (a Stepper's report of progress).
	onEmit func(s *seq, now time.Duration)
	// link is the KV connector's link (disagg.go); its bandwidth is 0
	// when the engine has none.
	link kvLink
}

// newEngine builds the engine for cfg (which must be valid) on clk.
func newEngine(cfg Config, clk clock) (*Engine, error) {
	e := &Engine{
		clock:   clk,
		wake:    make(chan struct{}, 1),
		retimed: make(chan struct{}, 1),
		knobs: Knobs{
			Slowdown: cfg.Slowdown, ErrorRate: cfg.ErrorRate,
			TTFTMs: cfg.TTFTMs, TokensPerSecond: cfg.TokensPerSecond,
		},
		models:      make(map[string]*modelStats, len(cfg.Models)),
		prefix:      cfg.PrefixCache && cfg.Slots == 0,
		recordTimes: cfg.StreamSummary,
		link:        kvLink{bytesPerSec: cfg.KVLinkGbps * 1e9 / 8, bytesPerToken: cfg.KVBytesPerToken},
	}
	for _, m := range cfg.Models {
		e.models[m] = newScaledModelStats(cfg.Slowdown)
	}
	lora, err := newLoRABank(cfg)
	if err != nil {
		return nil, err
	}
	e.lora = lora
	switch {
	case cfg.Slots > 0:
		e.maxRun, e.slotSize = cfg.Slots, cfg.CtxSize
		e.slots = make([]*seq, cfg.Slots)
		e.pool = &reservedPool{perSeq: cfg.CtxSize, cap: cfg.Slots * cfg.CtxSize}
	case cfg.Calibrated():
		e.maxRun = cfg.MaxNumSeqs
	default:
		e.maxRun = cfg.MaxConcurrency
		e.pool = &nominalPool{cap: cfg.KVCapacityTokens}
		if e.prefix {
			e.simpleCache = NewPrefixCache(max(1, cfg.KVCapacityTokens/blockSize))
		}
	}
	if !cfg.Calibrated() {
		e.sched = &simpleScheduler{e: e}
		return e, nil
	}
	prof, err := LookupProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	e.link.bytesPerToken = prof.KVBytesPerToken
	if e.pool == nil {
		capTokens := prof.KVCapacityTokens(cfg.GPUMemUtil, blockSize)
		if capTokens == 0 {
			return nil, fmt.Errorf("profile %s: no memory left for the KV cache at gpu_mem_util %v", prof.Name, cfg.GPUMemUtil)
		}
		e.pool = newPagedPool(capTokens, blockSize, e.prefix)
	}
	e.sched = &batchScheduler{e: e, prof: prof, budget: cfg.MaxBatchedTokens}
	return e, nil
}

// Run drives the engine in real time until ctx ends: one timer per step
// (or per token event in simple mode), none while idle. Only engines on the
// wall clock (those of a Server) may be run.
func (e *Engine) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		e.mu.Lock()
		wait, ok := e.sched.plan(e.clock.Now())
		interruptible := e.sched.interruptible()
		e.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-e.wake:
			}
			continue
		}
		if wait > 0 && !e.sleep(ctx, timer, wait, interruptible) {
			return
		}
		e.mu.Lock()
		e.sched.advance(e.clock.Now())
		e.mu.Unlock()
	}
}

// maxWait caps simulated durations so huge knobs cannot overflow.
const maxWait = 1_000_000 * time.Hour

// duration converts nanoseconds to a Duration in [0, maxWait].
func duration(ns float64) time.Duration {
	if !(ns > 0) { // also NaN
		return 0
	}
	if ns >= float64(maxWait) {
		return maxWait
	}
	return time.Duration(ns)
}

// sleep waits for the planned event; it returns false when ctx ends. A
// knob change re-times a forward pass in flight, so a huge slowdown can be
// undone.
func (e *Engine) sleep(ctx context.Context, timer *time.Timer, wait time.Duration, interruptible bool) bool {
	var wake <-chan struct{}
	if interruptible {
		wake = e.wake
	}
	timer.Reset(wait)
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
			return true
		case <-wake:
			timer.Stop()
			return true
		case <-e.retimed:
			e.mu.Lock()
			wait = e.sched.retime(e.clock.Now())
			e.mu.Unlock()
			timer.Reset(wait)
		}
	}
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit queues a request. The returned Stream reports its tokens; the
// caller must Close it.
func (e *Engine) Submit(r Request) (*Stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.submitLocked(r, e.clock.Now())
}

// submitLocked queues r as arrived at arrival (virtual runs learn of an
// arrival only at the end of the step it fell into).
func (e *Engine) submitLocked(r Request, arrival time.Duration) (*Stream, error) {
	if r.PromptTokens < 1 || r.MaxTokens < 1 {
		return nil, fmt.Errorf("%w: prompt and max tokens must be >= 1", ErrBadRequest)
	}
	model, adapter := r.Model, ""
	if e.lora != nil && e.lora.paths[model] != "" {
		// An adapter's requests are its base model's in the per-model
		// figures, as vLLM labels them with the served model name.
		model, adapter = e.lora.base, r.Model
	}
	ms, ok := e.models[model]
	if !ok {
		return nil, fmt.Errorf("%w: model %q not served", ErrBadRequest, r.Model)
	}
	if !e.pool.fits(r.PromptTokens, r.MaxTokens) {
		return nil, fmt.Errorf("%w: %d prompt + %d generated tokens", ErrContextTooLong, r.PromptTokens, r.MaxTokens)
	}
	e.nextID++
	s := &seq{
		id: e.nextID, model: model, adapter: adapter, stats: ms, stopReason: r.StopReason,
		prompt: r.PromptTokens, maxTokens: r.MaxTokens, target: r.PromptTokens,
		slot: -1, arrival: arrival, notify: make(chan struct{}, 1),
	}
	if s.stopReason == "" {
		s.stopReason = "length"
	}
	if e.prefix {
		s.hashes = adapterBlocks(r.Blocks[:CacheableBlocks(r.PromptTokens, len(r.Blocks))], adapter)
	}
	s.remote = r.RemotePrefill && e.link.on() && e.slots == nil
	e.waiting = append(e.waiting, s)
	e.poke()
	return &Stream{e: e, s: s}, nil
}

// Knobs returns the current run-time settings.
func (e *Engine) Knobs() Knobs {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.knobs
}

// SetKnobs replaces the run-time settings; they apply from the next step.
func (e *Engine) SetKnobs(k Knobs) {
	e.mu.Lock()
	e.knobs = k
	e.mu.Unlock()
	select {
	case e.retimed <- struct{}{}:
	default:
	}
}

// admit moves e.waiting[i] into the running batch; its adapter, if any,
// takes a slot (admissible said it may).
func (e *Engine) admit(i int, now time.Duration) *seq {
	s := e.waiting[i]
	e.waiting = slices.Delete(e.waiting, i, i+1)
	s.state = stateRunning
	if s.adapter != "" {
		s.loraLoad = e.lora.activate(s.adapter)
		s.loraHeld = true
	}
	if !s.scheduled {
		s.scheduled, s.admittedAt, s.firstCached = true, now, s.cachedTokens
		// Counted once, as vLLM does not count a preempted request's
		// re-admission as a new query.
		if e.prefix {
			e.prefixQueries += uint64(s.prompt)
			e.prefixHits += uint64(s.cachedTokens)
			s.stats.PrefixQueries += uint64(s.prompt)
			s.stats.PrefixHits += uint64(s.cachedTokens)
		}
	}
	if e.slots != nil {
		for i, o := range e.slots {
			if o == nil {
				e.slots[i], s.slot = s, i
				break
			}
		}
	}
	e.running = append(e.running, s)
	return s
}

// canAdmit reports whether the batch has room for one more sequence.
func (e *Engine) canAdmit() bool {
	return len(e.waiting) > 0 && (e.maxRun == 0 || len(e.running) < e.maxRun)
}

// nextAdmissible is the index of the first waiting sequence that may join
// the batch, or -1: vLLM skips a request whose adapter finds no slot (it
// keeps its place) and considers the next.
func (e *Engine) nextAdmissible(from int) int {
	for i := from; i < len(e.waiting); i++ {
		if s := e.waiting[i]; s.adapter == "" || e.lora.admissible(s.adapter) {
			return i
		}
	}
	return -1
}

// emit hands n new tokens of s to its client and finishes s when done.
func (e *Engine) emit(s *seq, n int, now time.Duration) {
	if s.emittedN == 0 {
		s.firstTokenAt = now
		s.stats.PromptTokens += uint64(s.prompt)
		s.stats.TTFT.observe((now - s.arrival).Seconds())
		if n > 1 {
			s.stats.ITL.observeN(0, uint64(n-1))
		}
	} else {
		// n tokens at once (the simple mode's steps) spread the gap since
		// the last evenly over them.
		s.stats.ITL.observeN((now-s.lastTokenAt).Seconds()/float64(n), uint64(n))
	}
	s.lastTokenAt = now
	if e.recordTimes {
		if s.tokenTimes == nil {
			s.tokenTimes = make([]time.Duration, 0, s.maxTokens)
		}
		for range n {
			s.tokenTimes = append(s.tokenTimes, now)
		}
	}
	s.emittedN += n
	s.stats.GenerationTokens += uint64(n)
	e.gen.add(now, n)
	s.emitted.Store(int64(s.emittedN))
	if s.emittedN >= s.maxTokens {
		e.finish(s, now)
	} else {
		s.signal()
	}
	if e.onEmit != nil {
		e.onEmit(s, now)
	}
}

// finish retires s; the caller removes it from e.running with compact.
func (e *Engine) finish(s *seq, now time.Duration) {
	e.free(s)
	s.state, s.doneAt = stateDone, now
	e.completed++
	if s.stopReason == "stop" {
		s.stats.SuccessStop++
	} else {
		s.stats.SuccessLength++
	}
	s.stats.E2E.observe((now - s.arrival).Seconds())
	s.finished.Store(true)
	s.signal()
}

// free releases the KV and slot s holds, and its hold on its adapter's.
func (e *Engine) free(s *seq) {
	e.pool.release(s)
	if s.loraHeld {
		s.loraHeld = false
		e.lora.stopped(s.adapter)
	}
	if s.slot >= 0 {
		e.slots[s.slot], s.slot = nil, -1
	}
}

// compact drops sequences that are no longer running from e.running.
func (e *Engine) compact() {
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state != stateRunning })
}

// preemptNewest evicts the newest running sequence by recompute: its KV is
// freed and it goes to the front of the queue, to prefill its prompt and
// the tokens already sent before it continues.
func (e *Engine) preemptNewest() *seq {
	s := e.running[len(e.running)-1]
	e.running = e.running[:len(e.running)-1]
	e.free(s)
	s.state = stateWaiting
	s.computed = 0
	s.target = s.prompt + s.emittedN
	// The remote KV was read once; a preempted request recomputes it.
	s.remote, s.loading = false, false
	s.preemptions++
	s.stats.Preemptions++
	e.preemptions++
	e.waiting = slices.Insert(e.waiting, 0, s)
	return s
}

// cancel drops s wherever it is, freeing its KV at once.
func (e *Engine) cancel(s *seq) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch s.state {
	case stateWaiting:
		e.waiting = slices.DeleteFunc(e.waiting, func(o *seq) bool { return o == s })
	case stateRunning:
		e.free(s)
		s.state = stateCancelled
		e.compact()
	default:
		return
	}
	s.state = stateCancelled
	e.poke()
}
