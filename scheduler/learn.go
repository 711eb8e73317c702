package scheduler

import (
	"context"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// This file holds the latency model's side of the scheduler: the fit of
// every (worker, model) at each snapshot, and what a ticket measures.

// fleetPriorStrength is the weight, in pseudo-observations, of the pooled
// curves of a model's other workers as a newcomer's prior: a start, soon
// outweighed (fleets are heterogeneous).
const fleetPriorStrength = 4

// fitLatency fits the latency model of every worker of snap for every
// model it serves, at now. A worker's prior is the pooled curves of the
// model's workers when some have statistics (latency.PriorFrom, weak),
// else latency.DefaultPrior; its own observations soon outweigh either.
// A worker whose own history is too short is Unknown whichever prior.
//
// The pooled prior applies to a worker with a few observations as well as
// to one with none: from the generic prior (a slow GPU) a newcomer with a
// handful of observations would be predicted slower than every known
// worker, never picked by the strategy predicted, and so never learned.
// Predicted from the fleet's curves, it ties with the fleet and gets its
// share of requests until its own history shows what it is; objectives
// are not enforced on it meanwhile (Unknown).
func fitLatency(snap state.Snapshot, now time.Time) []map[string]latency.Model {
	cfg := latency.DefaultConfig()
	// A model's pooled prior is only built when one of its workers is
	// Unknown, which most snapshots of a warm fleet have none of.
	priors := map[string]latency.Prior{}
	prior := func(model string) latency.Prior {
		if p, ok := priors[model]; ok {
			return p
		}
		var pooled latency.Stats
		for _, w := range snap.Workers {
			for _, m := range w.Spec.Models {
				if st, ok := w.LatencyStats[m]; ok && m == model && len(st.Sums) > 0 {
					pooled = cfg.Add(pooled, st)
				}
			}
		}
		p := latency.DefaultPrior()
		if len(pooled.Sums) > 0 {
			p = latency.PriorFrom(latency.Fit(cfg, pooled, p, now), fleetPriorStrength)
		}
		priors[model] = p
		return p
	}
	out := make([]map[string]latency.Model, len(snap.Workers))
	for i, w := range snap.Workers {
		ms := make(map[string]latency.Model, len(w.Spec.Models))
		for _, m := range w.Spec.Models {
			st := w.LatencyStats[m]
			fit := latency.Fit(cfg, st, latency.DefaultPrior(), now)
			if fit.Unknown() {
				fit = latency.Fit(cfg, st, prior(m), now)
			}
			ms[m] = fit
		}
		out[i] = ms
	}
	return out
}

// learning is what a ticket's latency observations are made of: the
// claimed worker's model when it was claimed, the features the claim was
// decided on, and what the model predicted from them.
type learning struct {
	model      latency.Model
	features   latency.Features
	ttft, tpot latency.Prediction
}

func newLearning(m latency.Model, f latency.Features) learning {
	return learning{model: m, features: f, ttft: m.PredictTTFT(f), tpot: m.PredictTPOT(f)}
}

// learnTimeout bounds the store round trips of learning, run off the
// request's path.
const learnTimeout = time.Second

// FirstToken tells the scheduler that the request had its first token,
// ttft after its claim. Only the first call counts. The store hears of it
// off the caller's path (a goroutine, bounded by learnTimeout): the
// request's prefill stops counting as ahead of others on its worker, and
// the TTFT joins the worker's latency statistics, unless Envoy served the
// request elsewhere (the features were another worker's).
func (t *Ticket) FirstToken(ttft time.Duration) {
	t.mu.Lock()
	if t.first || t.finished {
		t.mu.Unlock()
		return
	}
	t.first, t.ttft = true, ttft
	worker, disaggregated := t.worker, t.prefill != ""
	t.mu.Unlock()
	s := t.s
	now := s.now()
	// A disaggregated request's first token came after a prefill
	// elsewhere: not the decode worker's TTFT (nor a sample of its
	// adapter load time).
	learn := ttft > 0 && worker == t.Decision.Worker && !disaggregated
	if learn && t.adapterState.Loads() {
		// The engine loaded the adapter before this first token: what
		// the model predicted without the load is the rest of it. The
		// TTFT is not the latency model's: it would read the load as
		// slowness of the worker.
		s.loads.observe(worker, ttft-t.learn.ttft.Value, now)
		learn = false
	}
	if learn {
		s.errors.Record(latency.TTFT, t.learn.ttft.Value, ttft)
	}
	s.background(func(ctx context.Context) {
		if disaggregated {
			t.releasePrefill(ctx, false)
		}
		if err := s.store.FirstToken(ctx, t.ID); err != nil {
			s.log.Warn("first token", zap.String("request_id", t.Decision.RequestID), zap.Error(err))
		}
		if learn {
			s.addLatency(ctx, t, worker, latency.Observation{At: now, Features: t.learn.features, TTFT: ttft})
		}
	})
}

// learnTPOT measures the request's TPOT, (latency − TTFT)/(tokens − 1),
// and adds it to the worker's statistics when the request completed on
// the worker it was claimed on with two tokens or more; 0 otherwise.
func (t *Ticket) learnTPOT(worker string, elapsed time.Duration, o Outcome, now time.Time) time.Duration {
	if o.Aborted || o.UpstreamFailure || o.CompletionTokens < 2 || o.TTFT <= 0 || elapsed <= o.TTFT {
		return 0
	}
	tpot := (elapsed - o.TTFT) / time.Duration(o.CompletionTokens-1)
	if worker != t.Decision.Worker || tpot <= 0 {
		return tpot
	}
	s := t.s
	s.errors.Record(latency.TPOT, t.learn.tpot.Value, tpot)
	s.background(func(ctx context.Context) {
		s.addLatency(ctx, t, worker, latency.Observation{At: now, Features: t.learn.features, TPOT: tpot})
	})
	return tpot
}

func (s *Scheduler) addLatency(ctx context.Context, t *Ticket, worker string, o latency.Observation) {
	c := latency.DefaultConfig().Contribution(t.learn.model, o)
	if len(c.Sums) == 0 {
		return
	}
	err := s.store.AddLatency(ctx, []state.LatencyContribution{{Worker: worker, Model: t.Decision.Model, Stats: c}})
	if err != nil {
		s.log.Warn("add latency observation", zap.String("request_id", t.Decision.RequestID), zap.String("worker", worker), zap.Error(err))
	}
}

// background runs f off the request's path with its own deadline (on the
// caller's goroutine with Options.InlineLearning).
func (s *Scheduler) background(f func(ctx context.Context)) {
	if s.opts.InlineLearning {
		ctx, cancel := context.WithTimeout(context.Background(), learnTimeout)
		defer cancel()
		f(ctx)
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), learnTimeout)
		defer cancel()
		f(ctx)
	}()
}

// relativeError is |predicted − actual| / actual, 0 when actual is not
// positive.
func relativeError(predicted, actual time.Duration) float64 {
	if actual <= 0 {
		return 0
	}
	return math.Abs(float64(predicted-actual)) / float64(actual)
}

// PredictionErrors are the latency model's errors over this replica's
// last predictions of the workers its requests were claimed on.
func (s *Scheduler) PredictionErrors() (ttft, tpot latency.ErrorSummary) {
	return s.errors.Summary(latency.TTFT), s.errors.Summary(latency.TPOT)
}
