package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// Summary is one configuration (strategy, replicas, rate) over the study's
// seeds. Latencies are ms of virtual time. Estimates carry 95 % intervals
// over seeds and requests (stats.Bootstrap); per-seed figures without a
// bootstrap are a Spread over the seeds.
type Summary struct {
	Strategy string   `json:"strategy"`
	Replicas int      `json:"replicas"`
	QPS      float64  `json:"qps"`
	Seeds    []uint64 `json:"seeds"`
	Requests int      `json:"requests"`
	// TTFT and TPOT at p50, p90 and p99; TPOT is each request's mean
	// time per output token after the first.
	TTFT [3]stats.Estimate `json:"ttft_p50_p90_p99_ms"`
	TPOT [3]stats.Estimate `json:"tpot_p50_p90_p99_ms"`
	// Good is the share of requests within both SLOs; Goodput those per
	// second of the arrival span (req/s).
	Good    stats.Estimate `json:"good_fraction"`
	Goodput stats.Spread   `json:"goodput"`
	// OutputTokens is tokens generated per second, from the first arrival
	// to the last token.
	OutputTokens stats.Spread `json:"output_tokens_per_s"`
	// PrefixHit is the GPUs' prefix-cache hit rate (prompt tokens), per
	// seed; Hit the same as its mean over the seeds with the interval of
	// the seed-level bootstrap (stats.PerSeed), for paired comparisons.
	PrefixHit stats.Spread   `json:"prefix_hit_rate"`
	Hit       stats.Estimate `json:"prefix_hit_rate_mean"`
	// SnapshotAge is the mean age of the snapshot a decision was made
	// on (ms); Conflicts the share of decisions whose live claim changed
	// the snapshot's pick.
	SnapshotAge float64 `json:"snapshot_age_mean_ms"`
	Conflicts   float64 `json:"conflict_share"`
	// Queued is the share of decisions that waited in the router's queue
	// (scheduler.Decision.QueuePosition), QueueWait their mean wait (ms).
	Queued      float64 `json:"queued_share"`
	QueueWait   float64 `json:"queue_wait_mean_ms"`
	Refused     int     `json:"refused"`
	TooLong     int     `json:"too_long"`
	Preemptions uint64  `json:"preemptions"`
	// P90Ratio is the TTFT p90 over a baseline's (RatioBaselines) at the
	// same replicas and rate, with the interval of the paired bootstrap
	// (stats.Ratio), by baseline.
	P90Ratio map[string]stats.Estimate `json:"ttft_p90_ratio,omitempty"`
	// PredictionErrors are the latency model's errors (prederr.go).
	PredictionErrors *PredictionErrors `json:"prediction_errors,omitempty"`
	// LoRA is the adapter figures of a LoRA workload's runs.
	LoRA *LoRAFigures `json:"lora,omitempty"`
	// Misses explain the prefix cache's misses, one per seed (misses.go);
	// nil when no prompt shared blocks with another.
	Misses []*PrefixMisses `json:"prefix_misses,omitempty"`
	// Events and Wall are the simulation's own cost, summed over seeds:
	// events processed and the wall time they took.
	Events uint64        `json:"events"`
	Wall   time.Duration `json:"wall_ns"`
}

// EventsPerSecond is the simulator's speed on this configuration.
func (s Summary) EventsPerSecond() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Events) / s.Wall.Seconds()
}

// Report is a study's outcome.
type Report struct {
	Command   string    `json:"command,omitempty"`
	Study     Study     `json:"study"`
	Summaries []Summary `json:"summaries"`
	// Wall is the whole study's wall time, Events its events.
	Wall   time.Duration `json:"wall_ns"`
	Events uint64        `json:"events"`
	// Aims are the aims the study's configurations can judge, with their
	// verdicts: the fleet-scale aims (judgeAims) or a LoRA study's
	// (LoRAAims).
	Aims []report.Aim `json:"aims,omitempty"`
}

// Execute validates the study, then runs every configuration on every
// seed, one run at a time. progress, when not nil, gets a line per run.
func Execute(s Study, progress io.Writer) (*Report, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	src, err := s.Workload.load()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Study: s}
	for _, rate := range s.Rates() {
		reqs := make([][]Request, len(s.Seeds))
		for i, seed := range s.Seeds {
			reqs[i] = src.requests(rate, seed)
		}
		for _, strategy := range s.Strategies {
			for _, n := range s.Replicas {
				var runs []*RunResult
				var wall time.Duration
				for i, seed := range s.Seeds {
					run := Run{GPUs: s.GPUs, Engine: s.Engine, Replicas: n, Strategy: strategy, QPS: rate, Seed: seed, Router: s.Router}
					if s.Workload.Kind == KindLoRA {
						run.Adapters = s.Workload.LoRA.AdapterNames()
					}
					t0 := time.Now()
					res, err := simulate(run, reqs[i])
					if err != nil {
						return nil, fmt.Errorf("%s, %d replicas, %g req/s, seed %d: %w", strategy, n, rate, seed, err)
					}
					d := time.Since(t0)
					wall += d
					runs = append(runs, res)
					if progress != nil {
						fmt.Fprintf(progress, "sim: %s replicas=%d qps=%g seed=%d: %d events in %.2fs (%.0f/s), %v virtual\n",
							strategy, n, rate, seed, res.Events, d.Seconds(), float64(res.Events)/d.Seconds(), res.End.Round(time.Millisecond))
					}
				}
				sum := summarize(runs, s.SLO)
				sum.Wall = wall
				if s.Workload.Kind == KindLoRA {
					sum.LoRA = loraFigures(runs)
				}
				rep.Summaries = append(rep.Summaries, sum)
				rep.Events += sum.Events
			}
		}
	}
	rep.Wall = time.Since(start)
	addRatios(rep.Summaries)
	if s.Workload.Kind == KindLoRA {
		rep.Aims = LoRAAims(rep.Summaries)
	} else {
		rep.Aims = judgeAims(s, rep.Summaries)
	}
	return rep, nil
}

// RatioBaselines are the strategies every other's TTFT p90 (and adapter
// loads) is compared with when a study runs them: round robin, llm-d's
// prefix-aware default and the GIE's LoRA-affinity scheduler (emulated).
var RatioBaselines = []string{"round_robin", emulate.PrefixAffinityTokenLoad, emulate.LoRAQueueKVMaxScore}

// addRatios sets each summary's P90Ratio against the baselines run at its
// replicas and rate. The bootstrap of each configuration is seeded from
// its seeds, replicas and rate, not its strategy, so the replicates pair.
func addRatios(sums []Summary) {
	for i := range sums {
		for _, b := range RatioBaselines {
			for _, base := range sums {
				if base.Strategy != b || base.Replicas != sums[i].Replicas || base.QPS != sums[i].QPS || sums[i].Strategy == b {
					continue
				}
				if sums[i].P90Ratio == nil {
					sums[i].P90Ratio = map[string]stats.Estimate{}
				}
				sums[i].P90Ratio[b] = stats.Ratio(sums[i].TTFT[1], base.TTFT[1])
				if l := sums[i].LoRA; l != nil && base.LoRA != nil {
					if l.LoadsRatio == nil {
						l.LoadsRatio = map[string]stats.Estimate{}
					}
					l.LoadsRatio[b] = loadsRatio(l.seeds, base.LoRA.seeds, sums[i].Seeds[0]^uint64(sums[i].Replicas)<<32)
				}
			}
		}
	}
}

// summarize pools one configuration's runs (one per seed).
func summarize(runs []*RunResult, slo SLO) Summary {
	first := runs[0].Run
	sum := Summary{Strategy: first.Strategy, Replicas: first.Replicas, QPS: first.QPS}
	strata := make([][]loadgen.Result, len(runs))
	var goodput, tokens, hits []float64
	// The bootstrap reads the ITL bound off each request's gaps; the one
	// gap given is the request's TPOT, so its "ITL" is TPOT.
	sslo := stats.SLO{TTFT: slo.TTFT, ITL: slo.TPOT}
	var decisions, conflicts, queued int
	var age, waited time.Duration
	for i, r := range runs {
		decisions, conflicts, age = decisions+r.Decisions, conflicts+r.Conflicts, age+r.SnapshotAge
		queued, waited = queued+r.Queued, waited+r.Waited
		sum.Seeds = append(sum.Seeds, r.Run.Seed)
		sum.Requests += len(r.Requests)
		sum.Events += r.Events
		sum.Preemptions += r.Preemptions
		strata[i] = asResults(r.Requests)
		goodput = append(goodput, stats.Summarize(strata[i], sslo).Goodput)
		tokens = append(tokens, outputRate(r.Requests))
		h := 0.0
		if r.PrefixQueries > 0 {
			h = float64(r.PrefixHits) / float64(r.PrefixQueries)
		}
		hits = append(hits, h)
		if r.Misses != nil {
			sum.Misses = append(sum.Misses, r.Misses)
		}
		for _, q := range r.Requests {
			switch q.Outcome {
			case OutcomeRefused:
				sum.Refused++
			case OutcomeTooLong:
				sum.TooLong++
			}
		}
	}
	if decisions > 0 {
		sum.SnapshotAge = stats.Ms(age) / float64(decisions)
		sum.Conflicts = float64(conflicts) / float64(decisions)
		sum.Queued = float64(queued) / float64(decisions)
	}
	if queued > 0 {
		sum.QueueWait = stats.Ms(waited) / float64(queued)
	}
	// Seeded from the configuration, so the intervals are reproducible.
	rng := rand.New(rand.NewPCG(first.Seed, uint64(first.Replicas)<<32^uint64(first.QPS*1000)))
	st := stats.Bootstrap(strata, sslo, rng)
	sum.TTFT, sum.TPOT, sum.Good = st.TTFT, st.ITL, st.Good
	sum.Goodput, sum.OutputTokens, sum.PrefixHit = stats.SpreadOf(goodput), stats.SpreadOf(tokens), stats.SpreadOf(hits)
	sum.Hit = stats.PerSeed(hits)
	sum.PredictionErrors = summarizePredictions(runs, rng)
	return sum
}

// asResults are the requests as the benchmark's client would have measured
// them, with the request's TPOT as its one inter-token gap.
func asResults(rs []Result) []loadgen.Result {
	out := make([]loadgen.Result, len(rs))
	for i, r := range rs {
		o := loadgen.Result{Start: r.Arrival, Node: fmt.Sprint(r.GPU)}
		switch r.Outcome {
		case OutcomeOK:
			o.Status, o.TTFT, o.Latency, o.Tokens = 200, r.TTFT(), r.Done-r.Arrival, r.Tokens
			if r.Tokens > 1 {
				o.ITLs = []time.Duration{r.TPOT()}
			}
		case OutcomeTooLong:
			o.Status = 400
		case OutcomeMissingAdapter:
			o.Status = 404
		default:
			o.Status = 429
		}
		out[i] = o
	}
	return out
}

// outputRate is tokens generated per second from the first arrival to the
// last token.
func outputRate(rs []Result) float64 {
	var tokens int
	var first, last time.Duration = -1, 0
	for _, r := range rs {
		if first < 0 || r.Arrival < first {
			first = r.Arrival
		}
		if r.Outcome == OutcomeOK {
			tokens += r.Tokens
			last = max(last, r.Done)
		}
	}
	if last <= first {
		return 0
	}
	return float64(tokens) / (last - first).Seconds()
}
