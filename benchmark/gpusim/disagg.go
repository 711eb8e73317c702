package gpusim

import "time"

// Disaggregated prefill and decode, as vLLM serves them with its NIXL KV
// connector. A prefill worker is sent the prompt with max_tokens 1 and
// kv_transfer_params {"do_remote_decode": true}; it prefills, returns its
// one token and kv_transfer_params naming itself (engine id, host, port)
// and the prompt's blocks. A decode worker is sent the original request
// with those params ("do_remote_prefill": true): it reserves the prompt's
// KV blocks, loads the ones its own prefix cache lacks over the link, and
// then computes only the last prompt token (the step that yields the first
// token) before decoding as usual.
//
// The link is one per engine, its transfers one after the other at the
// configured bandwidth (--kv-link-gbps): a load of n tokens takes
// n × KV bytes per token / bandwidth, after the loads queued before it.
// Loads run beside the forward passes, as NIXL's reads do: a request
// loading holds its blocks but takes no part in a step until its load
// ends. A preempted request recomputes its prompt locally.

// kvLink is an engine's KV connector: its bandwidth (0: no connector) and
// the prompt KV size of one token.
type kvLink struct {
	bytesPerSec   float64
	bytesPerToken float64
	// freeAt is when the transfers queued so far end.
	freeAt time.Duration
}

func (l *kvLink) on() bool { return l.bytesPerSec > 0 }

// startLoad starts loading the KV of s's prompt that its admission did not
// find in the local prefix cache (s.computed tokens), all but the last
// token, which the engine computes. It returns when the load ends and
// records the transfer in s's model's figures.
func (e *Engine) startLoad(s *seq, now time.Duration) time.Duration {
	tokens := max(0, s.target-1-s.computed)
	bytes := float64(tokens) * e.link.bytesPerToken
	start := max(now, e.link.freeAt)
	dur := duration(bytes / e.link.bytesPerSec * float64(time.Second) * e.knobs.Slowdown)
	e.link.freeAt = start + dur
	s.stats.XferTime.observe(dur.Seconds())
	s.stats.XferBytes.observe(bytes)
	s.remote, s.loadedAt = false, start+dur
	return s.loadedAt
}

// admitRemote admits e.waiting[i], a request whose KV comes from a
// prefill worker: it reserves blocks for the whole prompt (sharing those
// of its prefix the cache holds) and starts the load. It returns false,
// changing nothing, when the blocks do not fit.
func (e *Engine) admitRemote(i int, now time.Duration) bool {
	s := e.waiting[i]
	if _, ok := e.pool.admit(s, s.target); !ok {
		return false
	}
	// What the pool found cached; the rest is loaded, not computed.
	s.cachedTokens = s.computed
	e.admit(i, now)
	s.loading = true
	e.startLoad(s, now)
	return true
}

// finishLoad ends s's load: every prompt token but the last is computed.
func (e *Engine) finishLoad(s *seq) {
	s.loading = false
	s.computed = max(s.computed, s.target-1)
	e.pool.computed(s)
}

// nextLoadEnd is the earliest end of a load in flight, if any.
func (e *Engine) nextLoadEnd() (time.Duration, bool) {
	var at time.Duration
	found := false
	for _, s := range e.running {
		if s.loading && (!found || s.loadedAt < at) {
			at, found = s.loadedAt, true
		}
	}
	return at, found
}
