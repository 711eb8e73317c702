package gpusim

import "time"

// simpleScheduler is the uncalibrated timing model: each running request
// gets its first token ttft after admission (times the share of its prompt
// not found in the prefix cache) and then one token every
// 1/tokens_per_second, independent of the others. Admission is FIFO,
// limited by max_concurrency only (or the slots in llama.cpp mode).
// tokens_per_second 0 means all tokens at once,
// so ttft 0 with tokens_per_second 0 adds no delay at all. Due times are
// derived from the current knobs at every event, so /admin/config changes
// apply to streams already running.
type simpleScheduler struct{ e *Engine }

func (p *simpleScheduler) interruptible() bool { return true }

// retime is 0: due times are recomputed from the knobs at every plan.
func (p *simpleScheduler) retime(time.Duration) time.Duration { return 0 }

// interval is the time between two tokens of one stream (0 = no delay).
func (p *simpleScheduler) interval() time.Duration {
	k := p.e.knobs
	if k.TokensPerSecond <= 0 {
		return 0
	}
	return duration(float64(time.Second) * k.Slowdown / k.TokensPerSecond)
}

// due is when the next token of s is due. s.nextAt holds the due time of
// its last token, or its admission time before the first. The first token
// takes the TTFT scaled by the share of the prompt not found in the prefix
// cache (all of it without one).
func (p *simpleScheduler) due(s *seq, interval time.Duration) time.Duration {
	if s.emittedN == 0 {
		k := p.e.knobs
		uncached := float64(s.prompt-s.cachedTokens) / float64(s.prompt)
		if s.loading { // the KV came over the link: no prefill
			uncached = 0
		}
		return s.nextAt + duration(k.TTFTMs*k.Slowdown*float64(time.Millisecond)*uncached)
	}
	return s.nextAt + interval
}

// lookup serves s from simple mode's prefix cache, which holds the blocks
// of recent prompts in what --kv-capacity-tokens leaves beside the running
// requests' context (least recently used first out). A prompt's blocks are
// cached from its admission: a simulation without prefill steps has no
// better moment.
func (p *simpleScheduler) lookup(s *seq) {
	c := p.e.simpleCache
	if c == nil {
		return
	}
	running := (p.e.pool.used() + blockSize - 1) / blockSize
	c.setCapacity(p.e.pool.capacity()/blockSize - running)
	s.cachedTokens = c.Access(s.hashes, s.prompt)
}

// ready is when s, just admitted, starts its TTFT: after its adapter's
// load when its admission, or another's moments before, started one.
// Streams do not share passes here, so a load delays only its adapter's.
func (p *simpleScheduler) ready(s *seq, now time.Duration) time.Duration {
	l := p.e.lora
	if s.adapter == "" {
		return now
	}
	if s.loraLoad {
		l.takePending()
		l.readyAt[s.adapter] = now + duration(float64(l.load)*p.e.knobs.Slowdown)
	}
	return max(now, l.readyAt[s.adapter])
}

func (p *simpleScheduler) plan(now time.Duration) (time.Duration, bool) {
	e := p.e
	for i := 0; e.canAdmit(); {
		if i = e.nextAdmissible(i); i < 0 {
			break
		}
		s := e.waiting[i]
		if !e.pool.reserve(s, s.prompt) {
			break
		}
		p.lookup(s)
		e.admit(i, now)
		s.computed, s.nextAt = s.cachedTokens, p.ready(s, now)
		if s.remote {
			s.loading = true
			s.nextAt = max(s.nextAt, e.startLoad(s, now))
		}
		s.computed = s.prompt
	}
	if len(e.running) == 0 {
		return 0, false
	}
	iv := p.interval()
	next := p.due(e.running[0], iv)
	for _, s := range e.running[1:] {
		next = min(next, p.due(s, iv))
	}
	return max(0, next-now), true
}

func (p *simpleScheduler) advance(now time.Duration) {
	e := p.e
	iv := p.interval()
	busy := 0
	for _, s := range e.running {
		due := p.due(s, iv)
		if due > now {
			continue
		}
		n := s.maxTokens - s.emittedN
		if iv > 0 {
			n = min(n, 1+int((now-due)/iv))
		}
		s.nextAt = due + time.Duration(n-1)*iv
		busy++
		s.computed += n
		e.pool.reserve(s, s.prompt+s.emittedN+n) // cannot fail: nothing or a whole slot is held
		e.emit(s, n, now)
	}
	if busy > 0 {
		e.steps++
		e.busySum += uint64(busy)
	}
	e.compact()
}
