package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// PDStudy compares prefill/decode splits of one fleet at equal GPU count:
// the aggregated fleet (split 0) and each split of Splits prefill GPUs,
// the latter at every decider threshold of Thresholds, on every rate and
// seed of the Study (its first strategy, its first replica count). Every
// engine records its token times: ITL is the gaps between tokens, and a
// request is good when its TTFT and its own p99 gap meet the SLO
// (SLO.TPOT bounds the gap).
type PDStudy struct {
	Study
	Splits     []int   `json:"splits"`
	Thresholds []int   `json:"thresholds"`
	LinkGbps   float64 `json:"link_gbps"`
}

// The aims judged at every rate, for every split and threshold.
const (
	// AimITLRatio: disaggregated p99 ITL at most half the aggregated.
	AimITLRatio = 0.5
	// AimGoodRatio: goodput at least the aggregated's, less a point of
	// non-inferiority margin (equal fleets tie within noise).
	AimGoodRatio = 0.99
	// MostlyCached is the share of the prompt that, held by the decode
	// GPU's prefix cache when the router decides, makes a prompt mostly
	// cached: such a request must never be disaggregated.
	MostlyCached = 0.5
)

// PDSummary is one configuration (split, threshold, rate) over the seeds.
// Latencies are ms of virtual time with 95 % intervals over seeds and
// requests (stats.Bootstrap).
type PDSummary struct {
	Prefill     int      `json:"prefill_gpus"`
	Decode      int      `json:"decode_gpus"`
	MinUncached int      `json:"min_uncached"`
	QPS         float64  `json:"qps"`
	Seeds       []uint64 `json:"seeds"`
	Requests    int      `json:"requests"`
	// TTFT and ITL at p50, p90 and p99; ITL pools every gap between two
	// tokens of a request.
	TTFT [3]stats.Estimate `json:"ttft_p50_p90_p99_ms"`
	ITL  [3]stats.Estimate `json:"itl_p50_p90_p99_ms"`
	// Good is the share of requests within both SLOs, Goodput those per
	// second of the arrival span (median over seeds [min, max]).
	Good    stats.Estimate `json:"good_fraction"`
	Goodput stats.Spread   `json:"goodput"`
	// Disaggregated counts the requests the router paired with a prefill
	// GPU; MostlyCachedDisaggregated those among them whose decode GPU
	// held more than MostlyCached of the prompt.
	Disaggregated             int `json:"disaggregated"`
	MostlyCachedDisaggregated int `json:"mostly_cached_disaggregated"`
	// UnderThreshold counts the paired requests whose prompt, past what
	// the decode GPU's cache held, was under the threshold: where the
	// router's prefix index and the engine's cache disagreed.
	UnderThreshold int    `json:"under_threshold_disaggregated"`
	Refused        int    `json:"refused"`
	Preemptions    uint64 `json:"preemptions"`
	// ITLRatio and GoodRatio are the p99 ITL and the good share over the
	// aggregated fleet's at the same rate (paired bootstrap); unset for
	// the aggregated fleet itself.
	ITLRatio  *stats.Estimate `json:"itl_p99_ratio,omitempty"`
	GoodRatio *stats.Estimate `json:"good_ratio,omitempty"`
	Wall      time.Duration   `json:"wall_ns"`
}

// Label names the configuration.
func (s PDSummary) Label() string {
	if s.Prefill == 0 {
		return fmt.Sprintf("aggregated %d", s.Decode)
	}
	return fmt.Sprintf("%dP+%dD t=%d", s.Prefill, s.Decode, s.MinUncached)
}

// PDReport is a PD study's outcome.
type PDReport struct {
	Command   string        `json:"command,omitempty"`
	Study     PDStudy       `json:"study"`
	Summaries []PDSummary   `json:"summaries"`
	Wall      time.Duration `json:"wall_ns"`
}

// Validate refuses a malformed study, naming the field.
func (s PDStudy) Validate() error {
	errs := []error{s.Study.Validate()}
	if len(s.Splits) == 0 {
		errs = append(errs, errors.New("splits: none given"))
	}
	for _, p := range s.Splits {
		d := Disagg{Prefill: p, LinkGbps: s.LinkGbps}
		errs = append(errs, d.validate(s.TotalGPUs()))
		if p > 0 && len(s.Thresholds) == 0 {
			errs = append(errs, errors.New("thresholds: none given for a disaggregated split"))
		}
	}
	for _, t := range s.Thresholds {
		if t < 0 {
			errs = append(errs, fmt.Errorf("thresholds: must be >= 0, got %d", t))
		}
	}
	return errors.Join(errs...)
}

// configs are the study's splits and thresholds, aggregated first.
func (s PDStudy) configs() []Disagg {
	var out []Disagg
	for _, p := range s.Splits {
		if p == 0 {
			out = slices.Insert(out, 0, Disagg{})
			continue
		}
		for _, t := range s.Thresholds {
			out = append(out, Disagg{Prefill: p, MinUncached: t, LinkGbps: s.LinkGbps})
		}
	}
	return out
}

// ExecutePD runs every configuration of s on every seed.
func ExecutePD(s PDStudy, progress io.Writer) (*PDReport, error) {
	s.Engine.StreamSummary = true
	if err := s.Validate(); err != nil {
		return nil, err
	}
	src, err := s.Workload.load()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &PDReport{Study: s}
	for _, rate := range s.Rates() {
		reqs := make([][]Request, len(s.Seeds))
		for i, seed := range s.Seeds {
			reqs[i] = src.requests(rate, seed)
		}
		var agg *PDSummary
		for _, dis := range s.configs() {
			var runs []*RunResult
			t0 := time.Now()
			for i, seed := range s.Seeds {
				run := Run{
					GPUs: s.GPUs, Engine: s.Engine, Replicas: s.Replicas[0], Strategy: s.Strategies[0],
					QPS: rate, Seed: seed, Router: s.Router, Disagg: dis,
				}
				t1 := time.Now()
				res, err := simulate(run, reqs[i])
				if err != nil {
					return nil, fmt.Errorf("prefill %d, threshold %d, %g req/s, seed %d: %w", dis.Prefill, dis.MinUncached, rate, seed, err)
				}
				runs = append(runs, res)
				if progress != nil {
					fmt.Fprintf(progress, "sim pd: prefill=%d threshold=%d qps=%g seed=%d: %d events in %.1fs\n",
						dis.Prefill, dis.MinUncached, rate, seed, res.Events, time.Since(t1).Seconds())
				}
			}
			sum := summarizePD(runs, s.SLO, s.TotalGPUs())
			sum.Wall = time.Since(t0)
			if dis.On() && agg != nil {
				itl, good := stats.Ratio(sum.ITL[2], agg.ITL[2]), stats.Ratio(sum.Good, agg.Good)
				sum.ITLRatio, sum.GoodRatio = &itl, &good
			}
			rep.Summaries = append(rep.Summaries, sum)
			if !dis.On() {
				agg = &rep.Summaries[len(rep.Summaries)-1]
			}
		}
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// summarizePD pools one configuration's runs (one per seed).
func summarizePD(runs []*RunResult, slo SLO, gpus int) PDSummary {
	first := runs[0].Run
	sum := PDSummary{Prefill: first.Disagg.Prefill, Decode: gpus - first.Disagg.Prefill, MinUncached: first.Disagg.MinUncached, QPS: first.QPS}
	sslo := stats.SLO{TTFT: slo.TTFT, ITL: slo.TPOT}
	strata := make([][]loadgen.Result, len(runs))
	var goodput []float64
	for i, r := range runs {
		sum.Seeds = append(sum.Seeds, r.Run.Seed)
		sum.Requests += len(r.Requests)
		sum.Preemptions += r.Preemptions
		strata[i] = asGapResults(r.Requests)
		goodput = append(goodput, stats.Summarize(strata[i], sslo).Goodput)
		for _, q := range r.Requests {
			if q.Outcome != OutcomeOK {
				sum.Refused++
			}
			if q.Prefill >= 0 {
				sum.Disaggregated++
				if float64(q.DecodeCached) > MostlyCached*float64(q.Prompt) {
					sum.MostlyCachedDisaggregated++
				}
				if q.Prompt-q.DecodeCached < first.Disagg.MinUncached {
					sum.UnderThreshold++
				}
			}
		}
	}
	// Seeded from the rate alone, so that every configuration's
	// replicates pair (stats.Ratio).
	rng := rand.New(rand.NewPCG(first.Seed, uint64(first.QPS*1000)))
	st := stats.Bootstrap(strata, sslo, rng)
	sum.TTFT, sum.ITL, sum.Good = st.TTFT, st.ITL, st.Good
	sum.Goodput = stats.SpreadOf(goodput)
	return sum
}

// asGapResults are the requests as a client would have measured them,
// with every gap between their tokens.
func asGapResults(rs []Result) []loadgen.Result {
	out := asResults(rs)
	for i, r := range rs {
		if r.Outcome == OutcomeOK && len(r.Gaps) > 0 {
			out[i].ITLs = r.Gaps
		}
	}
	return out
}
