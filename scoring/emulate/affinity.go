package emulate

import (
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Defaults of llm-d's optimized-baseline profile ("sticky until
// saturated"): prefix-cache-affinity-filter, token-load-scorer,
// max-score-picker, on the approximate index (approx.go).
const (
	// affinityThreshold is the filter's affinityThreshold: endpoints whose
	// prefix score is at least this are sticky.
	affinityThreshold = 0.80
	// affinityMaxPenalty is maxTTFTPenaltyMs: stickiness breaks when the
	// best sticky endpoint's estimated TTFT is this much worse than the
	// best endpoint's.
	affinityMaxPenalty = 18 * time.Second
	// affinityPeakPrefill is peakPrefillThroughput (tokens/s) as shipped,
	// calibrated for Qwen3-32B on two H100s; used only for a worker with
	// no prefill rate of its own.
	affinityPeakPrefill = 15928.0
	// tokenLoadThreshold is the token-load scorer's queueThresholdTokens.
	tokenLoadThreshold = 4194304
	// filteredCost is added to the cost of an endpoint the filter removed:
	// more than any score difference (scores are in [0, 1]), so the pick
	// is among the kept endpoints unless all of them are at their cap.
	filteredCost = 10
)

// prefixAffinityTokenLoad is prefix_affinity_token_load, llm-d's current
// default profile (the optimized-baseline guide since August 2026):
//
//  1. prefix score per endpoint = matched 64-token blocks / request blocks
//     on this replica's approximate index (approx.go);
//  2. the affinity filter keeps the endpoints scoring ≥ 0.80 when there
//     are any, unless the best of them has an estimated TTFT more than
//     18 s above the best endpoint's (then it keeps all): "sticky until
//     saturated". Estimated TTFT = in-flight tokens / peak prefill
//     throughput;
//  3. token-load score = 1 − min(1, load / 4,194,304), load = this
//     replica's in-flight uncached prompt tokens on the endpoint plus the
//     request's own uncached tokens there (the lookahead form of the
//     profile's description); the highest score wins, random ties.
//
// In-flight tokens are per replica, as upstream's inflight-load producer
// keeps them: only the uncached part of each prompt routed there (prompt
// − matched blocks at the pick).
//
// Simplified: peak prefill throughput is the worker's own prefill rate
// (scoring.Worker.PrefillRate: one full chunk over the step computing it,
// which is what the guide's calibration recipe measures) rather than the
// shipped Qwen3-32B figure, which only applies to that model and GPU; the
// shipped figure is used when a worker has none. A request's prompt
// tokens count as in flight until its claim is released, where upstream
// releases them at the first streamed chunk (the scheduler learns of a
// request's end, not its first token), so under load stickiness breaks
// somewhat earlier than upstream's. explorationProbability is 0 as
// shipped, so there is no exploration to emulate.
type prefixAffinityTokenLoad struct {
	mu       sync.Mutex
	index    *approxIndex
	inflight map[string]int        // worker → uncached prompt tokens routed, not released
	routed   map[string]tokenClaim // claim id → what it added
}

type tokenClaim struct {
	worker string
	tokens int
}

var _ scoring.Strategy = (*prefixAffinityTokenLoad)(nil)

func newPrefixAffinityTokenLoad() *prefixAffinityTokenLoad {
	return &prefixAffinityTokenLoad{index: newApproxIndex(), inflight: map[string]int{}, routed: map[string]tokenClaim{}}
}

func (*prefixAffinityTokenLoad) Name() string { return PrefixAffinityTokenLoad }

// Plan filters and scores; Base is the cost: −token-load score, plus
// filteredCost for an endpoint the filter removed. Each candidate carries
// its prefix score and estimated TTFT for the decision log.
func (s *prefixAffinityTokenLoad) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	blocks := approxBlocks(in.Job.Blocks)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range eligible {
		s.index.tune(w.ID, w.KVBlocks)
	}
	matched := s.index.match(blocks)
	score := make([]float64, len(eligible))
	ttft := make([]float64, len(eligible))
	for i, w := range eligible {
		if len(blocks) > 0 {
			score[i] = float64(matched[w.ID]) / float64(len(blocks))
		}
		ttft[i] = float64(s.inflight[w.ID]) / peakPrefill(w)
	}
	keep := affinityFilter(score, ttft)
	out := make([]scoring.Candidate, len(eligible))
	for i, w := range eligible {
		uncached := max(in.Job.PromptTokens-matched[w.ID]*approxBlockTokens, 0)
		load := float64(s.inflight[w.ID] + uncached)
		filtered := 0.0
		if !keep[i] {
			filtered = 1
		}
		terms := []scoring.Term{
			{Name: "prefix_score", Value: score[i]},
			{Name: "ttft_estimate_seconds", Value: ttft[i]},
			{Name: "filtered_out", Weight: filteredCost, Value: filtered},
			{Name: "token_load_score", Weight: -1, Value: 1 - min(1, load/tokenLoadThreshold)},
		}
		out[i] = scoring.Candidate{
			Worker: w.ID, Cap: w.MaxConcurrency, Terms: terms,
			Curve: scoring.Curve{Base: terms[2].Contribution() + terms[3].Contribution()},
		}
	}
	return out
}

// affinityFilter is the prefix-cache-affinity-filter: which endpoints it
// keeps, given their prefix scores and estimated TTFTs (seconds).
func affinityFilter(score, ttft []float64) []bool {
	keep := make([]bool, len(score))
	bestSticky, best := -1.0, -1.0
	for i := range score {
		if best < 0 || ttft[i] < best {
			best = ttft[i]
		}
		if score[i] >= affinityThreshold {
			keep[i] = true
			if bestSticky < 0 || ttft[i] < bestSticky {
				bestSticky = ttft[i]
			}
		}
	}
	if bestSticky < 0 || bestSticky-best > affinityMaxPenalty.Seconds() {
		for i := range keep {
			keep[i] = true
		}
	}
	return keep
}

// peakPrefill is the worker's prefill rate, tokens/s (see the type's
// comment).
func peakPrefill(w scoring.Worker) float64 {
	if w.PrefillRate > 0 {
		return w.PrefillRate
	}
	return affinityPeakPrefill
}

// Claimed records the request's blocks as routed to worker and its
// uncached prompt tokens as in flight there.
func (s *prefixAffinityTokenLoad) Claimed(id string, job scoring.Job, worker string, _ time.Time) {
	blocks := approxBlocks(job.Blocks)
	s.mu.Lock()
	defer s.mu.Unlock()
	matched := s.index.match(blocks)[worker]
	c := tokenClaim{worker: worker, tokens: max(job.PromptTokens-matched*approxBlockTokens, 0)}
	s.routed[id] = c
	s.inflight[worker] += c.tokens
	s.index.add(worker, blocks)
}

// Released takes the request's tokens off its worker; its blocks stay in
// the index.
func (s *prefixAffinityTokenLoad) Released(id string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.routed[id]
	if !ok {
		return
	}
	delete(s.routed, id)
	if s.inflight[c.worker] -= c.tokens; s.inflight[c.worker] <= 0 {
		delete(s.inflight, c.worker)
	}
}
