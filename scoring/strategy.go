package scoring

import (
	"fmt"
	"slices"
	"time"
)

// Weights are the scored formula's coefficients.
type Weights struct {
	Active, Queue, Latency, JobCost, Throughput, Distance, KVPressure, GPUUtil float64
	// Prefix weighs the unmatched fraction of the prompt's blocks on the
	// worker, TokenLoad its in-flight tokens relative to its KV capacity;
	// both are scored by the store on live figures (see LiveWeights).
	Prefix, TokenLoad float64
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

// Names of the built-in strategies.
const (
	RoundRobin     = "round_robin"
	LeastLoaded    = "least_loaded"
	LatencyBased   = "latency_based"
	InferenceAware = "inference_aware"
	Scored         = "scored"
)

// Names lists the strategies New builds: the product's own. The
// emulations of other schedulers, for the benchmark, are in
// scoring/emulate.
func Names() []string {
	return []string{RoundRobin, LeastLoaded, LatencyBased, InferenceAware, Scored}
}

// New returns the named strategy.
func New(name string, p Params) (Strategy, error) {
	switch name {
	case RoundRobin:
		return roundRobin{}, nil
	case LeastLoaded:
		return leastLoaded{}, nil
	case LatencyBased:
		return latencyBased{}, nil
	case InferenceAware:
		return inferenceAware{p: p}, nil
	case Scored:
		return scored{p: p}, nil
	}
	return nil, fmt.Errorf("unknown strategy %q", name)
}

// Filter splits the workers serving the job's model into eligible ones and
// excluded ones with a reason. The cap is not checked here: it depends on the
// live in-flight count, which only the atomic claim reads.
func Filter(job Job, workers []Worker) (eligible []Worker, excluded []Excluded) {
	for _, w := range workers {
		switch {
		case !w.Serves(job.Model):
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
	return plan
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

type scored struct{ p Params }

func (scored) Name() string { return Scored }

// Plan computes every term of the scored formula except active, which the
// store adds from the live count (Slope = Weights.Active).
func (s scored) Plan(in Input, eligible []Worker) []Candidate {
	wt := s.p.Weights
	fresh := func(a Average) Average {
		if s.p.Staleness > 0 && a.Age > s.p.Staleness {
			return Average{} // stale: unknown, not zero
		}
		return a
	}
	maxLat := maxKnown(eligible, func(w Worker) Average { return fresh(w.Latency) })
	maxTPS := maxKnown(eligible, func(w Worker) Average { return fresh(w.TokensPerSec) })
	out := make([]Candidate, 0, len(eligible))
	const nTerms = 7
	backing := make([]Term, 0, nTerms*len(eligible)) // one allocation for every candidate's terms
	var liveBacking []LiveTerm                       // and one for their live terms (at most 2 each)
	if wt.Prefix != 0 || wt.TokenLoad != 0 {
		liveBacking = make([]LiveTerm, 2*len(eligible))
	}
	for i, w := range eligible {
		terms := append(backing[len(backing):], []Term{
			signalTerm("queue", wt.Queue, w.Queue),
			ratioTerm("norm_latency", wt.Latency, fresh(w.Latency), maxLat),
			s.jobCostTerm(in.Job, fresh(w.TTFT), fresh(w.TokensPerSec)),
			ratioTerm("norm_throughput", -wt.Throughput, fresh(w.TokensPerSec), maxTPS),
			{Name: "node_distance", Weight: wt.Distance, Value: w.Distance},
			signalTerm("kv_pressure", wt.KVPressure, w.KVPressure),
			signalTerm("gpu_util", wt.GPUUtil, w.GPUUtil),
		}...)
		backing = backing[:len(backing)+nTerms]
		terms = terms[:nTerms:nTerms]
		base := 0.0
		for _, t := range terms {
			base += t.Contribution()
		}
		c := candidate(w, Curve{Base: base, Slope: wt.Active}, terms...)
		if liveBacking != nil {
			c.LiveTerms = liveBacking[2*i : 2*i : 2*i+2]
			s.live(&c, w)
		}
		out = append(out, c)
	}
	return out
}

// live adds the candidate's live terms: prefix_miss (the unmatched
// fraction of the prompt's blocks) and token_load (in-flight and uncached
// tokens relative to its KV capacity), with its index bound, its trust
// and, with an SLO and a known prefill rate, the prefill load at which its
// match yields.
func (s scored) live(c *Candidate, w Worker) {
	wt := s.p.Weights
	if wt.Prefix == 0 && wt.TokenLoad == 0 {
		return
	}
	c.LiveWeights = LiveWeights{KVBlocks: w.KVBlocks, Trust: w.PrefixTrust}
	if wt.Prefix != 0 {
		c.AddLive(LiveTerm{Name: "prefix_miss", Weight: wt.Prefix, Miss: 1})
		if s.p.TTFTSLO > 0 && w.PrefillRate > 0 {
			c.LiveWeights.PrefillLimit = s.p.TTFTSLO.Seconds() * w.PrefillRate
		}
	}
	if wt.TokenLoad != 0 && w.KVBlocks > 0 {
		per := 1 / float64(w.KVBlocks*BlockTokens)
		c.AddLive(LiveTerm{Name: "token_load", Weight: wt.TokenLoad, Prefill: per, Decode: per, Uncached: per})
	}
}

// jobCostTerm is cost/(cost+scale) with cost = ttft + out_est/tps seconds.
func (s scored) jobCostTerm(job Job, ttft, tps Average) Term {
	t := Term{Name: "norm_job_cost", Weight: s.p.Weights.JobCost}
	if tps.Samples == 0 || tps.Value <= 0 {
		t.Unknown = true
		return t
	}
	cost := job.OutputEstimate() / tps.Value
	if ttft.Samples > 0 {
		cost += ttft.Value
	}
	scale := s.p.JobCostScale.Seconds()
	if scale <= 0 {
		scale = 10
	}
	t.Value = cost / (cost + scale)
	return t
}

func signalTerm(name string, weight float64, s Signal) Term {
	return Term{Name: name, Weight: weight, Value: s.Value, Unknown: !s.Known}
}

func ratioTerm(name string, weight float64, a Average, maxV float64) Term {
	t := Term{Name: name, Weight: weight}
	if a.Samples == 0 || maxV <= 0 {
		t.Unknown = true
		return t
	}
	t.Value = a.Value / maxV
	return t
}

func maxKnown(ws []Worker, f func(Worker) Average) float64 {
	m := 0.0
	for _, w := range ws {
		if a := f(w); a.Samples > 0 && a.Value > m {
			m = a.Value
		}
	}
	return m
}

// Distance is the node_distance term: 0 same zone, 0.5 same region, 1
// elsewhere; 0 when either locality is unset.
func Distance(workerZone, workerRegion, zone, region string) float64 {
	switch {
	case zone != "" && workerZone == zone:
		return 0
	case region != "" && workerRegion == region:
		return 0.5
	case (zone == "" && region == "") || (workerZone == "" && workerRegion == ""):
		return 0
	default:
		return 1
	}
}
