package scoring

import (
	"slices"
	"time"
)

// Weights are the scored formula's coefficients.
type Weights struct {
	// Active weighs the live in-flight count (the curve's slope); Prefix
	// the unmatched fraction of the prompt's blocks on the worker,
	// TokenLoad its in-flight tokens relative to its KV capacity. The
	// store evaluates these three inside the atomic claim (see LiveWeights).
	Active, Prefix, TokenLoad float64
	// Terms weighs the snapshot terms by key (scoring.weights.<key>, see
	// RegisterTerm); a term without an entry weighs 0. DefaultTermWeights
	// holds every registered term's default.
	Terms map[string]float64
}

// Params configures every strategy.
type Params struct {
	Weights      Weights
	JobCostScale time.Duration
	// TTFTSLO is the time to first token the prefix load guard protects:
	// a warm worker's match stops counting once its in-flight prefill plus
	// the request's uncached tokens would take longer than this at its
	// prefill rate. 0: no guard.
	TTFTSLO time.Duration

	// inference_aware: expected completion time, the formula of an
	// earlier router design.
	MinSamples  int64
	Staleness   time.Duration
	LoadPenalty float64
}

// Input is everything a strategy sees for one decision. Workers should be in
// a random order: ties are broken by position.
type Input struct {
	Job     Job
	Workers []Worker
	// Cursor drives round_robin; the caller increments it per decision.
	Cursor uint64
	// Now is the decision's time, for strategies whose state ages (the
	// peer emulations' caches); scoring reads no clock of its own.
	Now time.Time
}

// Strategy turns an input into a plan.
type Strategy interface {
	Name() string
	Plan(in Input, eligible []Worker) []Candidate
}

// Names of the product's strategies.
const (
	RoundRobin     = "round_robin"
	LeastLoaded    = "least_loaded"
	LatencyBased   = "latency_based"
	InferenceAware = "inference_aware"
	Scored         = "scored"
	Predicted      = "predicted"
)

// The product's strategies register here; other packages register theirs
// the same way (the benchmark's emulations of other schedulers, in
// scoring/emulate).
func init() {
	RegisterStrategy(RoundRobin, func(Params) Strategy { return roundRobin{} })
	RegisterStrategy(LeastLoaded, func(Params) Strategy { return leastLoaded{} })
	RegisterStrategy(LatencyBased, func(Params) Strategy { return latencyBased{} })
	RegisterStrategy(InferenceAware, func(p Params) Strategy { return inferenceAware{p: p} })
	RegisterStrategy(Scored, newScored)
	RegisterStrategy(Predicted, newPredicted)
}

// Filter splits the workers serving the job's model into eligible ones and
// excluded ones with a reason. The cap is not checked here: it depends on the
// live in-flight count, which only the atomic claim reads.
func Filter(job Job, workers []Worker) (eligible []Worker, excluded []Excluded) {
	for _, w := range workers {
		switch {
		case !w.Serves(job.Model), job.Adapter != "" && !w.ServesAdapter(job.Adapter):
			continue
		case w.Draining:
			excluded = append(excluded, Excluded{w.ID, "draining"})
		case w.Joining:
			excluded = append(excluded, Excluded{w.ID, "joining"})
		case w.Health != Healthy && w.Health != Recovering:
			excluded = append(excluded, Excluded{w.ID, string(w.Health)})
		default:
			eligible = append(eligible, w)
		}
	}
	return eligible, excluded
}

// Build filters and plans in one call.
func Build(s Strategy, in Input) Plan {
	eligible, excluded := Filter(in.Job, in.Workers)
	plan := Plan{Strategy: s.Name(), Excluded: excluded}
	if len(eligible) == 0 {
		return plan
	}
	plan.Candidates = s.Plan(in, eligible)
	if s.Name() == InferenceAware && allInfinite(plan.Candidates) {
		plan.Fallback = LeastLoaded
		plan.Candidates = leastLoaded{}.Plan(in, eligible)
	}
	if _, blind := s.(AdapterBlind); !blind {
		AddAdapter(plan.Strategy, in.Job, eligible, plan.Candidates)
	}
	return plan
}

// AdapterBlind is implemented by strategies whose picks must stay their
// own when a request names a LoRA adapter: the benchmark's emulations of
// other schedulers, which weigh adapters by their originals' rules or not
// at all. Build adds no adapter weights to their candidates (the store
// still records where adapters are placed).
type AdapterBlind interface {
	AdapterBlind()
}

func allInfinite(cs []Candidate) bool {
	for _, c := range cs {
		if !IsInfinite(c.Curve.Base) {
			return false
		}
	}
	return true
}

func candidate(w Worker, c Curve, terms ...Term) Candidate {
	return Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: c, Terms: terms}
}

type roundRobin struct{}

func (roundRobin) Name() string { return RoundRobin }

// Plan ranks workers by their distance from the cursor in a stable (by id)
// rotation; the store claims the first one below its cap.
func (roundRobin) Plan(in Input, eligible []Worker) []Candidate {
	ids := make([]string, len(eligible))
	for i, w := range eligible {
		ids[i] = w.ID
	}
	slices.Sort(ids)
	n := uint64(len(ids))
	start := in.Cursor % n
	out := make([]Candidate, 0, len(eligible))
	for _, w := range eligible {
		pos := uint64(slices.Index(ids, w.ID))
		rank := float64((pos + n - start) % n)
		out = append(out, candidate(w, Curve{Base: rank}, Term{Name: "rotation", Weight: 1, Value: rank}))
	}
	return out
}

type leastLoaded struct{}

func (leastLoaded) Name() string { return LeastLoaded }

// Plan scores each worker by its live in-flight count alone.
func (leastLoaded) Plan(_ Input, eligible []Worker) []Candidate {
	out := make([]Candidate, 0, len(eligible))
	for _, w := range eligible {
		out = append(out, candidate(w, Curve{Slope: 1}))
	}
	return out
}

type latencyBased struct{}

func (latencyBased) Name() string { return LatencyBased }

// Plan scores each worker by its end-to-end latency moving average; a worker
// with no samples scores 0, so new workers are tried first.
func (latencyBased) Plan(_ Input, eligible []Worker) []Candidate {
	out := make([]Candidate, 0, len(eligible))
	for _, w := range eligible {
		t := Term{Name: "latency_s", Weight: 1, Value: w.Latency.Value, Unknown: w.Latency.Samples == 0}
		out = append(out, candidate(w, Curve{Base: t.Contribution()}, t))
	}
	return out
}

type inferenceAware struct{ p Params }

func (inferenceAware) Name() string { return InferenceAware }

// Plan: estimated_latency = avg_ttft + out_est/avg_tps,
// score = estimated_latency·(1 + active·load_penalty); +inf (Infinite)
// without MinSamples fresh samples.
func (s inferenceAware) Plan(in Input, eligible []Worker) []Candidate {
	out := make([]Candidate, 0, len(eligible))
	for _, w := range eligible {
		est, ok := s.estimate(in.Job, w)
		if !ok {
			out = append(out, candidate(w, Curve{Base: Infinite, Mult: s.p.LoadPenalty},
				Term{Name: "estimated_latency_s", Weight: 1, Unknown: true}))
			continue
		}
		out = append(out, candidate(w, Curve{Base: est, Mult: s.p.LoadPenalty},
			Term{Name: "estimated_latency_s", Weight: 1, Value: est}))
	}
	return out
}

func (s inferenceAware) estimate(job Job, w Worker) (float64, bool) {
	fresh := func(a Average) bool {
		return a.Samples >= s.p.MinSamples && (s.p.Staleness <= 0 || a.Age <= s.p.Staleness)
	}
	if !fresh(w.TTFT) || !fresh(w.TokensPerSec) || w.TokensPerSec.Value <= 0 {
		return 0, false
	}
	return w.TTFT.Value + job.OutputEstimate()/w.TokensPerSec.Value, true
}
