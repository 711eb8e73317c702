package scheduler

import (
	"context"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Prefill/decode disaggregation (docs/disaggregation.md). A model whose
// workers include prefill-only ones (state.RolePrefill) is placed by a
// paired claim (state.PairClaimer): the decode worker is the strategy's
// pick among the workers that take whole requests, exactly as without
// prefill workers, and the store then applies the decider
// (scoring.Disaggregate) to the prompt its prefix match leaves and, when
// it disaggregates, claims the best prefill worker with it. The decode
// pick is the strategy's because the decider must read the match where
// the request would otherwise run; its curve (in-flight count against
// the cap: decode headroom) and live token load (in-flight tokens over
// KV capacity) are what favour decode room. The prefill pick's score is
// the prefill it would compute before the request's first token,
// (prefill ahead + prompt past its match) / its prefill rate, in
// seconds: prefix hits and little queued prefill.

// Disaggregation configures prefill/decode disaggregation.
type Disaggregation struct {
	// MinUncached is the decider's threshold: the request is
	// disaggregated when the prompt tokens the decode worker's prefix
	// match leaves reach it (scoring.Disaggregate).
	MinUncached int
}

// DefaultMinUncachedTokens is the config's default threshold. llm-d's
// prefix-based-pd-decider defaults to 0 (always disaggregate) and its
// examples use 4 to 16 tokens; the prefix index here matches in groups of
// state.IndexStride blocks (64 tokens), so a threshold under 64 would
// send fully cached prompts to a prefill worker, and a prefill of a few
// hundred tokens costs the decode batch less than the extra hop and the
// KV transfer do.
const DefaultMinUncachedTokens = 256

// fallbackPrefillRate stands in for a prefill worker's rate when neither
// its spec nor the fleet default gives one: it only scales the prefill
// pick's scores, which compare workers of the same unknown rate.
const fallbackPrefillRate = 10000.0

// prefillSlope is the prefill score of each request in flight on the
// worker (seconds): a tie-break between workers with equal prefill ahead.
const prefillSlope = 1e-3

// PrefillDecision is the disaggregation part of a decision: the decider's
// input and the prefill pick. Only models with prefill workers have one.
type PrefillDecision struct {
	Disaggregated bool `json:"disaggregated"`
	// UncachedTokens is the prompt the decode worker's match left, what
	// the decider compared with MinUncachedTokens.
	UncachedTokens    int    `json:"uncached_tokens"`
	MinUncachedTokens int    `json:"min_uncached_tokens"`
	Worker            string `json:"prefill_worker,omitempty"`
	// Candidates are the prefill workers as the claim read them (none
	// when the decider did not look).
	Candidates []scoring.Line `json:"prefill_candidates,omitempty"`
	// Queued: the request waited in the queue, and a waiter's grant is a
	// decode worker alone: aggregated, the decider never ran.
	Queued bool `json:"queued,omitempty"`
}

// splitRoles keeps in ws the workers that take whole requests and returns
// the model's prefill-only workers (those not joining).
func (v *view) splitRoles(ws []scoring.Worker) (decode, prefill []scoring.Worker) {
	decode = ws[:0:0]
	for _, w := range ws {
		if v.role(w.ID).Prefills() {
			if !w.Joining {
				prefill = append(prefill, w)
			}
			continue
		}
		decode = append(decode, w)
	}
	return decode, prefill
}

// role is a worker's role (RoleBoth for an unknown one).
func (v *view) role(id string) state.Role {
	if i, ok := v.index[id]; ok {
		return v.snap.Workers[i].Spec.Role.OrBoth()
	}
	return state.RoleBoth
}

// prefillCandidates scores the prefill workers: the score is in seconds,
// each token ahead or uncached weighing 1/rate.
func prefillCandidates(ws []scoring.Worker) ([]scoring.Candidate, []state.PrefillCandidate) {
	cands := make([]scoring.Candidate, len(ws))
	out := make([]state.PrefillCandidate, len(ws))
	for i, w := range ws {
		rate := w.PrefillRate
		if rate <= 0 {
			rate = fallbackPrefillRate
		}
		c := scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Slope: prefillSlope}}
		c.AddLive(scoring.LiveTerm{Name: "prefill_ahead", Weight: 1 / rate, Ahead: 1})
		c.AddLive(scoring.LiveTerm{Name: "prefill_uncached", Weight: 1 / rate, Uncached: 1})
		c.LiveWeights.KVBlocks = w.KVBlocks
		cands[i] = c
		out[i] = state.PrefillCandidate{
			Worker: w.ID, Cap: c.Cap, Base: c.Curve.Base, Slope: c.Curve.Slope,
			Ahead: c.LiveWeights.Ahead, Uncached: c.LiveWeights.Uncached, KVBlocks: w.KVBlocks,
		}
	}
	return cands, out
}

// pairClaim is what a paired claim adds to a decision: the prefill
// candidates and the store's answer about them.
type pairClaim struct {
	cands []scoring.Candidate
	res   state.PairResult
}

// claim has the store claim req. With prefill workers for the model and a
// store that pairs claims, it is a paired claim (the decider runs inside
// it, on the match it reads); pair is then set. req's Prompt is filled
// when empty: the decider reads the match.
func (s *Scheduler) claim(ctx context.Context, req *state.ClaimRequest, pl *placement) (res state.ClaimResult, pair *pairClaim, err error) {
	pc, ok := s.store.(state.PairClaimer)
	if len(pl.prefill) == 0 || !ok {
		res, err = s.store.Claim(ctx, *req)
		return res, nil, err
	}
	if !req.ReadsLive() || req.Prompt.Blocks == nil {
		if n := s.opts.MaxAffinityBlocks; n > 0 && len(pl.job.Blocks) > n {
			pl.job.Blocks = pl.job.Blocks[:n]
		}
		req.Prompt = pl.job.Prompt()
	}
	cands, prefill := prefillCandidates(pl.prefill)
	pres, err := pc.ClaimPair(ctx, state.PairRequest{ClaimRequest: *req, Prefill: prefill, MinUncached: s.opts.Disaggregation.MinUncached})
	return pres.ClaimResult, &pairClaim{cands: cands, res: pres}, err
}

// record is the decision's disaggregation part.
func (p *pairClaim) record(prompt scoring.Prompt, minUncached int) *PrefillDecision {
	d := &PrefillDecision{Disaggregated: p.res.Disaggregated(), UncachedTokens: p.res.Uncached, MinUncachedTokens: minUncached}
	if p.res.PrefillLive != nil {
		d.Candidates = scoring.BreakdownLive(p.cands, prompt, p.res.PrefillActive, p.res.PrefillLive)
	}
	if d.Disaggregated {
		d.Worker = p.cands[p.res.PrefillIndex].Worker
	}
	return d
}

// holdPrefill gives ticket t the prefill claim of its paired claim, renewed
// with t's until released.
func (s *Scheduler) holdPrefill(t *Ticket, worker string) {
	t.mu.Lock()
	t.prefill, t.prefillID = worker, state.PrefillClaimID(t.ID)
	t.mu.Unlock()
	s.mu.Lock()
	s.live[t.prefillID] = t
	s.mu.Unlock()
}

// Prefill is the prefill worker the request's prompt is prefilled on (the
// sidecar's prefiller), and whether it was disaggregated at all. It stays
// set after the prefill claim is released.
func (t *Ticket) Prefill() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.prefill, t.prefill != ""
}

// PrefillOver tells a disaggregated request's ticket that its prefill is
// over: the decode worker's response began, which its sidecar sends only
// once the prefill answered or was given up; failed when the sidecar says
// it gave up and served the request locally. The prefill claim is
// released then, off the caller's path, a failure counting against the
// prefill worker's health as a failed request does. A no-op for an
// aggregated request or a prefill claim already released.
func (t *Ticket) PrefillOver(failed bool) {
	t.mu.Lock()
	pending := t.prefillID != "" && !t.prefillDone
	t.mu.Unlock()
	if pending {
		t.s.background(func(ctx context.Context) { t.releasePrefill(ctx, failed) })
	}
}

// releasePrefill gives the prefill claim back, once: when the response
// begins (PrefillOver), at the first token (the sidecar has had the
// prefill's answer, or given up on it and prefilled locally, before the
// decode worker sends a token), or when the request ends without either.
// Holding it until the decode ends would keep the prefill worker's slot
// and prefill tokens counted for the whole decode, which it takes no part
// in. The release carries no latency: the router does not see the
// prefill's own; failed counts a failed request on the prefill worker.
func (t *Ticket) releasePrefill(ctx context.Context, failed bool) {
	t.mu.Lock()
	id, worker := t.prefillID, t.prefill
	if id == "" || t.prefillDone {
		t.mu.Unlock()
		return
	}
	t.prefillDone = true
	t.mu.Unlock()
	s := t.s
	s.mu.Lock()
	delete(s.live, id)
	s.mu.Unlock()
	if _, err := s.store.Release(ctx, state.Release{ID: id, Worker: worker, Alpha: s.opts.EMAAlpha, Failed: failed}); err != nil {
		s.log.Warn("release prefill claim", zap.String("request_id", t.Decision.RequestID), zap.String("worker", worker), zap.Error(err))
	}
}

// disaggregationField logs the decision's disaggregation part when there
// is one.
func disaggregationField(p *PrefillDecision) zap.Field {
	if p == nil {
		return zap.Skip()
	}
	return zap.Object("disaggregation", (*prefillLog)(p))
}

type prefillLog PrefillDecision

func (p *prefillLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddBool("disaggregated", p.Disaggregated)
	enc.AddInt("uncached_tokens", p.UncachedTokens)
	enc.AddInt("min_uncached_tokens", p.MinUncachedTokens)
	if p.Queued {
		enc.AddBool("queued", true)
	}
	if p.Worker != "" {
		enc.AddString("prefill_worker", p.Worker)
	}
	if len(p.Candidates) > 0 {
		return enc.AddArray("prefill_candidates", lines(p.Candidates))
	}
	return nil
}
