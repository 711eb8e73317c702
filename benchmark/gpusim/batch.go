package gpusim

import "time"

// batchScheduler is continuous batching with chunked prefill, as in vLLM V1:
// each plan is one forward pass. Running sequences come first, in admission
// order (one token for a decode, a chunk for a prefill), then waiting ones
// while the token budget, max_num_seqs and the KV cache allow. The pass
// takes the host's per-step CPU time for its sequences, the profiled
// linear-layer time for its tokens and the time to read its sequences' KV
// from HBM.
type batchScheduler struct {
	e      *Engine
	prof   *Profile
	budget int

	step     []stepItem
	lastStep stepInfo
	start    time.Duration // when the pass in flight started
	// chained is set when a pass has just ended and the next is planned
	// at once: the next pass then starts when the last one was due to
	// end, not when the host got round to it (see plan).
	chained bool
	// idle is set when what is planned is no pass but a wait for a KV
	// load to end (disagg.go); an arrival may cut it short.
	idle bool
}

// maxCatchUp bounds how late a pass's end may be noticed and still have the
// next pass start on time. A host that stalls for longer loses the time, as
// a GPU whose host stalled would.
const maxCatchUp = 20 * time.Millisecond

type stepItem struct {
	s *seq
	n int // tokens of s in this pass
}

// stepInfo describes the last planned forward pass.
type stepInfo struct {
	tokens, contextTokens, seqs int
	loads                       int           // adapters loaded before the pass
	base                        time.Duration // before slowdown
	dur                         time.Duration
}

func (b *batchScheduler) interruptible() bool { return b.idle }

func (b *batchScheduler) plan(now time.Duration) (time.Duration, bool) {
	e := b.e
	b.step = b.step[:0]
	budget := b.budget
	preempted := false
	b.idle = false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		if s.loading {
			if s.loadedAt > now {
				continue // its KV is still on the link
			}
			e.finishLoad(s)
		}
		n := 1
		if s.computed < s.target {
			n = min(s.target-s.computed, budget)
		}
		for !e.pool.reserve(s, s.computed+n) {
			// Out of KV: evict the newest (possibly s itself) and retry.
			preempted = true
			if e.preemptNewest() == s {
				n = 0
				break
			}
		}
		if n > 0 {
			b.step = append(b.step, stepItem{s, n})
			budget -= n
		}
	}
	// vLLM admits nothing in a pass that had to preempt; an empty pass
	// admits anyway so the GPU cannot stall.
	if !preempted || len(b.step) == 0 {
		for i := 0; budget > 0 && e.canAdmit(); {
			if i = e.nextAdmissible(i); i < 0 {
				break
			}
			s := e.waiting[i]
			if s.remote {
				if !e.admitRemote(i, now) {
					break
				}
				continue
			}
			n, ok := e.pool.admit(s, budget)
			if !ok {
				break
			}
			s.cachedTokens = s.computed
			e.admit(i, now)
			b.step = append(b.step, stepItem{s, n})
			budget -= n
		}
	}
	if len(b.step) == 0 {
		b.chained = false
		if end, ok := e.nextLoadEnd(); ok {
			// Nothing to compute until a load ends.
			b.idle, b.start = true, now
			b.lastStep = stepInfo{dur: end - now}
			return end - now, true
		}
		return 0, false
	}
	// Back-to-back passes are timed from the planned end of the last one.
	// On the wall clock the timer fires, and the loop gets the lock, a
	// little after that end; starting from "now" would add that lateness
	// to every pass, so a busier host (more processes, a time-scaled
	// fleet) would quietly shrink the simulated GPU's capacity.
	start := b.onTimeline(now)
	info := stepInfo{seqs: len(b.step)}
	for _, it := range b.step {
		info.tokens += it.n
		info.contextTokens += it.s.computed + it.n
	}
	info.base = b.prof.StepTime(info.tokens, info.contextTokens, info.seqs)
	if e.lora != nil {
		// Adapters entering a slot load before the pass runs.
		info.loads = e.lora.takePending()
		info.base += time.Duration(info.loads) * e.lora.load
	}
	info.dur = duration(float64(info.base) * e.knobs.Slowdown)
	b.lastStep, b.start = info, start
	return max(0, start+info.dur-now), true
}

// onTimeline is the planned end of the last pass, when passes run back
// to back and the host noticed that end at most maxCatchUp ago; else now.
func (b *batchScheduler) onTimeline(now time.Duration) time.Duration {
	if end := b.start + b.lastStep.dur; b.chained && end <= now && now-end <= maxCatchUp {
		return end
	}
	return now
}

func (b *batchScheduler) retime(now time.Duration) time.Duration {
	if b.idle { // a load's end does not move with the knobs
		return max(0, b.start+b.lastStep.dur-now)
	}
	b.lastStep.dur = duration(float64(b.lastStep.base) * b.e.knobs.Slowdown)
	return max(0, b.start+b.lastStep.dur-now)
}

func (b *batchScheduler) advance(now time.Duration) {
	e := b.e
	if len(b.step) == 0 {
		b.idle = false
		return
	}
	b.chained = true
	e.steps++
	e.busySum += uint64(len(b.step))
	// The pass's tokens are the GPU's at the pass's planned end, not when
	// the host noticed it: the engine's figures (its token times, its
	// latency histograms) are the simulated GPU's, free of the host's
	// wake-up lateness, which on a time-scaled fleet is a large share of
	// a gap (1 ms late is 7 ms of GPU time at scale 0.15). A stall beyond
	// maxCatchUp is the GPU's lost time, as the next pass's start treats it.
	at := b.onTimeline(now)
	for _, it := range b.step {
		s := it.s
		if s.state != stateRunning {
			continue // cancelled during the pass
		}
		s.computed += it.n
		e.pool.computed(s)
		if s.computed >= s.target {
			e.emit(s, 1, at)
		}
	}
	b.step = b.step[:0]
	e.compact()
}
