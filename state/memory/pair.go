package memory

import (
	"context"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

var _ state.PairClaimer = (*Store)(nil)

// ClaimPair claims a decode worker as Claim does and, when the decider says
// so, a prefill worker with it, under the one lock (see claimpair.lua).
func (m *Store) ClaimPair(_ context.Context, req state.PairRequest) (state.PairResult, error) {
	m.lock()
	defer m.unlock()
	pair := &pairPick{req: req, out: state.PairResult{PrefillIndex: -1}}
	res, err := m.claimLocked(req.ClaimRequest, pair)
	pair.out.ClaimResult = res
	return pair.out, err
}

// pairPick is a ClaimPair under way: decide runs once the decode claim is
// held.
type pairPick struct {
	req state.PairRequest
	out state.PairResult
}

// decide reads the decode worker's match, applies the decider and, when it
// disaggregates, claims the best available prefill candidate and moves
// the decode claim's tokens to decode (the KV it receives and the output).
func (p *pairPick) decide(m *Store, req state.ClaimRequest, res state.ClaimResult, best int, now time.Time) {
	match := 0
	if res.Live != nil {
		match = res.Live[best].Match
	}
	p.out.Uncached = req.Prompt.Uncached(match)
	if !scoring.Disaggregate(p.out.Uncached, req.Prompt.Uncached(0), p.req.MinUncached) || len(p.req.Prefill) == 0 {
		return
	}
	n := len(p.req.Prefill)
	p.out.PrefillActive, p.out.PrefillAvailable, p.out.PrefillLive = make([]int, n), make([]bool, n), make([]scoring.Live, n)
	pick, pickScore := -1, 0.0
	for i, pc := range p.req.Prefill {
		w, ok := m.workers[pc.Worker]
		if !ok || pc.Worker == req.Candidates[best].Worker {
			continue
		}
		p.out.PrefillActive[i] = w.InFlight
		p.out.PrefillAvailable[i] = w.available()
		if !p.out.PrefillAvailable[i] || w.full(pc.Cap) {
			continue
		}
		l := w.live(req.Prompt.Blocks)
		p.out.PrefillLive[i] = l
		c := pc.Candidate()
		s := c.Score(w.InFlight) + scoring.LiveScore(c.LiveWeights, req.Prompt, l)
		if pick < 0 || s < pickScore {
			pick, pickScore = i, s
		}
	}
	if pick < 0 || !m.globalRoom() {
		return
	}
	pc := p.req.Prefill[pick]
	pre, dec := state.PairTokens(req.Prompt, match, p.out.PrefillLive[pick].Match)
	d := m.claims[req.ID]
	dw := m.workers[d.worker]
	dw.addTokens(d.tok, -1)
	d.tok = claimTokens{decode: dec}
	dw.addTokens(d.tok, 1)
	pw := m.workers[pc.Worker]
	m.hold(state.PrefillClaimID(req.ID), pc.Worker, now, claimTokens{prefill: pre, ahead: pre})
	pw.recordBlocks(req.Prompt.Blocks, pc.Candidate().IndexBound())
	pw.PredictedHitTokens += req.Prompt.PredictedHits(p.out.PrefillLive[pick].Match)
	p.out.PrefillIndex = pick
}
