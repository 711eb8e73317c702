package gpusim

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// SimRequest is one request of an offline run.
type SimRequest struct {
	Arrival      time.Duration
	PromptTokens int
	OutputTokens int
	// Blocks are the prompt's chained block hashes (scoring/prefix, as
	// the server derives them from a body; ChatBlockHashes and
	// MooncakeRow.BlockHashes compute them for a text), so a replay models
	// prefix caching. nil: nothing is ever cached for this request.
	Blocks []uint64
	// RemotePrefill: the prompt's KV is loaded from a prefill worker over
	// the KV link (Config.KVLinkGbps) instead of being computed.
	RemotePrefill bool
}

// SimResult is what happened to one SimRequest. Times are from the start of
// the run.
type SimResult struct {
	Arrival    time.Duration
	Scheduled  time.Duration // first admitted into the batch
	FirstToken time.Duration
	Done       time.Duration
	Tokens     int // tokens generated
	// CachedTokens are the prompt tokens found in the prefix cache at the
	// request's first admission.
	CachedTokens int
	// Preemptions counts how often the request was evicted and recomputed.
	Preemptions int
	// Rejected is true when the request could never fit the KV cache.
	Rejected bool
	// Gaps are the engine-clock gaps between consecutive tokens, recorded
	// only when cfg.StreamSummary is set (nil otherwise).
	Gaps []time.Duration
}

// TTFT is the time to first token.
func (r SimResult) TTFT() time.Duration { return r.FirstToken - r.Arrival }

// Simulate runs reqs through one GPU described by cfg in virtual time: the
// clock jumps from one step (or token event) to the next, so an hour of
// traffic takes seconds. reqs need not be sorted. The first model of cfg
// serves them all.
func Simulate(cfg Config, reqs []SimRequest) ([]SimResult, State, error) {
	return simulate(cfg, reqs, nil)
}

// simulate is Simulate with a hook called after every step.
func simulate(cfg Config, reqs []SimRequest, afterStep func(*Engine) error) ([]SimResult, State, error) {
	if cfg.Listen == "" {
		cfg.Listen = "sim"
	}
	if err := cfg.Validate(); err != nil {
		return nil, State{}, err
	}
	clk := &virtualClock{}
	e, err := newEngine(cfg, clk)
	if err != nil {
		return nil, State{}, err
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(reqs[a].Arrival - reqs[b].Arrival) })

	out := make([]SimResult, len(reqs))
	streams := make([]*Stream, len(reqs))
	next := 0
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		for next < len(order) && reqs[order[next]].Arrival <= clk.t {
			i := order[next]
			next++
			r := Request{
				Model: cfg.Models[0], PromptTokens: reqs[i].PromptTokens, MaxTokens: reqs[i].OutputTokens,
				Blocks: reqs[i].Blocks, RemotePrefill: reqs[i].RemotePrefill,
			}
			st, err := e.submitLocked(r, reqs[i].Arrival)
			switch {
			case errors.Is(err, ErrContextTooLong):
				out[i] = SimResult{Arrival: reqs[i].Arrival, Rejected: true}
			case err != nil:
				return nil, State{}, fmt.Errorf("request %d: %w", i, err)
			default:
				streams[i] = st
			}
		}
		wait, ok := e.sched.plan(clk.t)
		if !ok {
			if next == len(order) {
				if len(e.waiting) > 0 {
					return nil, State{}, fmt.Errorf("stalled at %v with %d waiting", clk.t, len(e.waiting))
				}
				break
			}
			clk.t = reqs[order[next]].Arrival
			continue
		}
		at := clk.t + wait
		if e.sched.interruptible() && next < len(order) && reqs[order[next]].Arrival < at {
			at = reqs[order[next]].Arrival
		}
		clk.t = at
		e.sched.advance(clk.t)
		if afterStep != nil {
			if err := afterStep(e); err != nil {
				return nil, State{}, fmt.Errorf("at %v: %w", clk.t, err)
			}
		}
	}
	for i, st := range streams {
		if st == nil {
			continue
		}
		s := st.s
		out[i] = SimResult{
			Arrival: s.arrival, Scheduled: s.admittedAt, FirstToken: s.firstTokenAt,
			Done: s.doneAt, Tokens: s.emittedN, Preemptions: s.preemptions,
			CachedTokens: s.firstCached,
		}
		for k := 1; k < len(s.tokenTimes); k++ {
			out[i].Gaps = append(out[i].Gaps, s.tokenTimes[k]-s.tokenTimes[k-1])
		}
	}
	return out, e.stateLocked(), nil
}
