package scoring

import (
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
)

// predicted scores each worker by the request's predicted completion time
// there, from the worker's fitted latency model (scoring/latency), plus
// the time its prefill holds up the requests already running there:
//
//	score = TTFT + o·TPOT + r·au·u
//	TTFT  = a0 + aq·q + au·u + a2·a + a3·(q + u)·a
//	TPOT  = b0 + b1·(a + 1) + b2·T
//
// o is the request's output tokens (Job.DecodeTokens), q the prefill ahead
// (Live.Ahead), u its uncached prompt, a the in-flight requests and T the
// tokens in flight with the request's own (token counts in thousands in
// the model, per token here). The prefill part of TTFT, aq·q + au·u +
// a3·r·(q + u) with r the snapshot's in-flight count (the live form has
// no product of the count and tokens), is the live form, read inside the
// claim, so that the prefix match (through u) and the load are one number in
// seconds; the rest is the curve, Base = a0 + o·(b0 + b1 + b2·T) with T
// from the snapshot, Slope = a2 + o·b1 on the live count.
//
// The stall. A prefill shares the engine's steps with the decodes running
// there: each of them waits about as long as the prefill computes, au·u,
// so a request placed cold costs the r requests in flight there (the
// snapshot's count) r·au·u of their time, and a prefix hit saves it all.
// Without this term a hit saves only the request's own au·u, against
// o·TPOT that grows with every request in flight: at 1,000 output tokens
// one more request in flight outweighs a 6,000-token hit, and the score
// spreads a prefix's requests over the fleet, recomputing it everywhere.
// The stall is a live term outside the ceiling (LiveWeights.Stall): it is
// not the request's own latency.
//
// Objectives. The live form is the TTFT less a0 + a2·r, so a candidate's
// Ceiling is the request's TTFT objective less that: the claim skips, as
// if full, a worker that would make the request miss it, on live figures.
// A worker that cannot meet an objective whatever its load gets the
// Ceiling Unattainable: one whose a0 + a2·r alone passes the TTFT
// objective, or whose TPOT predicted on the snapshot passes the TPOT objective (adding the
// request there would break it). With every candidate skipped the request
// waits in the queue, and the scheduler sheds it once its TTFT objective
// can no longer be met (IdleTTFT). A model still Unknown for a target
// does not enforce that target's objective: its numbers are the prior's,
// a deliberately slow GPU, and a new worker is worth a try.
//
// Exploration. Predictions from a prior, even the fleet's curves, are
// never exactly the fleet's: a worker with too little history would rank
// just behind a known one and, where load hardly moves the known one's
// predictions, never get the requests it needs to be learned. So while
// some eligible worker is known, an unknown one's base is spread over its
// first exploreInFlight requests in flight (Base/exploreInFlight more
// slope, no base): idle, it ranks first on its live terms; at
// exploreInFlight in flight it scores as predicted; past it, more: a few
// requests to learn from, not a burst onto a worker that may be slow.
// With every worker unknown (a fresh fleet) nothing explores: all are
// predicted alike.
type predicted struct {
	// prior is the model of a worker with no entry for the job's model:
	// the default prior, Unknown.
	prior latency.Model
}

func newPredicted(Params) Strategy {
	return predicted{prior: latency.Fit(latency.DefaultConfig(), latency.Stats{}, latency.DefaultPrior(), time.Time{})}
}

func (predicted) Name() string { return Predicted }

// exploreInFlight is the in-flight count up to which a worker whose model
// is still unknown ranks ahead of its prediction, in a fleet where some
// worker is known (see predicted's Exploration).
const exploreInFlight = 2

// Unattainable is the Ceiling of a candidate that cannot meet the
// request's objectives: every live score above 0 passes it. A live score is
// 0 only for a request with its whole prompt cached on a worker with
// nothing in flight, which then runs its a0 alone.
const Unattainable = 1e-300

// kilo converts the model's coefficients per thousand tokens to per token.
const kilo = 1e-3

// model is w's latency model for j's model, or the prior.
func (s predicted) model(j Job, w *Worker) latency.Model {
	if m, ok := w.LatencyModels[j.Model]; ok {
		return m
	}
	return s.prior
}

// Plan gives each worker its curve, its live TTFT terms and its ceiling.
func (s predicted) Plan(in Input, eligible []Worker) []Candidate {
	j := in.Job
	o := float64(j.DecodeTokens())
	out := make([]Candidate, 0, len(eligible))
	explore := false // some eligible worker is known: the unknown ones explore
	for i := range eligible {
		if !s.model(j, &eligible[i]).Unknown() {
			explore = true
			break
		}
	}
	backing := make([]Term, 2*len(eligible))
	liveBacking := make([]LiveTerm, 4*len(eligible))
	for i := range eligible {
		w := &eligible[i]
		m := s.model(j, w)
		f := w.Features(j)
		ttft, tpot := m.PredictTTFT(f), m.PredictTPOT(f)
		a, b := m.TTFT.Coef, m.TPOT.Coef
		// The TPOT with the request at the snapshot's tokens, less the
		// part of the sequences in flight (b1 per request), which the
		// curve's slope adds back on the live count: b1 stays for the
		// request's own sequence.
		perToken := b[0] + b[1] + b[2]*kilo*float64(tokensWith(f))
		terms := backing[2*i : 2*i+2 : 2*i+2]
		terms[0] = Term{Name: "predicted_ttft", Value: ttft.Value.Seconds(), Unknown: ttft.Unknown}
		terms[1] = Term{Name: "predicted_tpot", Value: tpot.Value.Seconds(), Unknown: tpot.Unknown}
		r := float64(max(f.Running, 0))
		c := candidate(*w, Curve{Base: a[0] + o*perToken, Slope: a[3] + o*b[1]}, terms...)
		c.LiveTerms = liveBacking[4*i : 4*i : 4*i+4]
		c.LiveWeights = LiveWeights{KVBlocks: w.KVBlocks, Trust: w.PrefixTrust}
		c.AddLive(LiveTerm{Name: "ttft_ahead", Weight: a[1] * kilo, Ahead: 1})
		c.AddLive(LiveTerm{Name: "ttft_prefill", Weight: a[2] * kilo, Uncached: 1})
		c.AddLive(LiveTerm{Name: "ttft_running_prefill", Weight: a[4] * kilo * r, Ahead: 1, Uncached: 1})
		if f.Running > 0 {
			c.AddLive(LiveTerm{Name: "prefill_stall", Weight: a[2] * kilo * float64(f.Running), Stall: 1})
		}
		c.LiveWeights.Ceiling = ceiling(j.Objectives, m, a[0]+a[3]*r, tpot)
		if explore && m.Unknown() {
			// The base is spread over the first exploreInFlight requests.
			c.Curve.Slope += c.Curve.Base / exploreInFlight
			c.Curve.Base = 0
		}
		out = append(out, c)
	}
	return out
}

// tokensWith is the tokens in flight with the request (the TPOT model's T).
func tokensWith(f latency.Features) int {
	return max(f.PrefillTokens, 0) + max(f.DecodeTokens, 0) + max(f.Uncached, 0) + max(f.Output, 0)
}

// ceiling is the most a candidate's live score may be for the request to
// meet its objectives there (0: no bound); fixed is the TTFT outside the
// live form.
func ceiling(obj Objectives, m latency.Model, fixed float64, tpot latency.Prediction) float64 {
	if obj.TPOT > 0 && !tpot.Unknown && tpot.Value > obj.TPOT {
		return Unattainable
	}
	if obj.TTFT <= 0 || m.TTFT.Unknown {
		return 0
	}
	if c := obj.TTFT.Seconds() - fixed; c > 0 {
		return c
	}
	return Unattainable
}

// IdleTTFT is the least TTFT any eligible worker is predicted to give j
// when idle, its whole prompt uncached (a request granted from the queue
// is counted so): once a request has waited its TTFT objective less this,
// no worker can meet the objective any more. ok is false when some
// eligible worker's TTFT model is Unknown: it enforces no objective, so
// the request can always go there.
func (s predicted) IdleTTFT(j Job, eligible []Worker) (best time.Duration, ok bool) {
	for i := range eligible {
		m := s.model(j, &eligible[i])
		p := m.PredictTTFT(latency.Features{Uncached: j.PromptTokens, Output: j.DecodeTokens()})
		if p.Unknown {
			return 0, false
		}
		if !ok || p.Value < best {
			best, ok = p.Value, true
		}
	}
	return best, ok
}
