package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// Estimate is a figure with its 95 % confidence interval and its value in
// each seed.
//
// How it is computed: Value is the figure over every measured request of
// every seed, pooled. The interval is a two-level (hierarchical)
// bootstrap. Each replicate first draws as many seeds as there are, with
// replacement, then rebuilds each drawn seed's measured requests (as many
// as it had) from blocks of consecutive requests drawn with replacement
// (circularly), pools them and recomputes the figure; Lo and Hi are the
// 2.5th and 97.5th percentiles of Replicates replicates.
//
// The seed level is there because a run is one draw of more than its
// requests: Envoy's random two-choice picks, the order in which a
// balancer's ties fall and a rare long overload episode on the slowest
// GPU all change from one run of a seed to the next, and no resampling of
// one run's requests can see that. Between seeds they show up as spread,
// so drawing seeds carries it into the interval. Without the seed level,
// 6 of 70 configurations' p90 TTFT intervals failed to overlap across
// three repeats of the same code on the Azure trace (LEAST_REQUEST's seed
// 1 moved between 686 and 1,317 ms); with it, none did (docs/benchmark.md,
// "What a run is").
//
// Blocks, not single requests, because neighbours in time share a queue: a
// burst makes a run of slow requests, and resampling requests one by one
// would treat them as independent. Each seed's block length is chosen
// from its own measured autocorrelation (blockLength). Seeds shows each
// seed's own figure.
type Estimate struct {
	Value float64   `json:"value"`
	Lo    float64   `json:"lo"`
	Hi    float64   `json:"hi"`
	Seeds []float64 `json:"seeds"`
	// Within is the interval without the seed level: the uncertainty of
	// the figure for these seeds' workloads alone (blocks within each seed,
	// every seed once). It is narrower, and misses the spread between runs
	// that no seed controls; llm-bench agree reports it beside the main
	// interval so that the stricter view stays visible.
	// Nil where there is none: ratios, hit rates, and reports written
	// before it existed.
	Within *[2]float64 `json:"within_seeds,omitempty"`
	// reps are the replicates, kept for ratios between setups.
	reps []float64
}

// Replicates is enough for stable 2.5/97.5 percentiles (each has
// about 7 replicates beyond it) at a cost of seconds per comparison; each
// figure draws them twice, with the seed level and without (Within).
const Replicates = 300

// Metric names of a Stats.
const (
	MetricTTFT     = "ttft"
	MetricE2E      = "e2e"
	MetricITL      = "itl"
	MetricTPS      = "tps"
	MetricGood     = "good"
	MetricErrors   = "errors"
	MetricTPSRatio = "tps_p5_over_p50"
	MetricTPSCV    = "tps_cv"
)

// Stats are one setup's figures at one load over its seeds, each with its
// interval. Latencies are ms of GPU time.
type Stats struct {
	Setup string  `json:"setup"`
	Load  float64 `json:"load"`
	// Seeds are the seeds pooled; Overload lists the seeds left out because
	// their offered rate exceeded what their requests needed (see
	// CompareReport.Overload).
	Seeds    []uint64 `json:"seeds"`
	Requests int      `json:"requests"`
	// Blocks are the bootstrap's block lengths, one per seed (blockLength).
	Blocks []int       `json:"bootstrap_blocks"`
	TTFT   [3]Estimate `json:"ttft_p50_p90_p99_ms"`
	E2E    [3]Estimate `json:"e2e_p50_p90_p99_ms"`
	ITL    [3]Estimate `json:"itl_p50_p90_p99_ms"`
	// TPS is each request's decode rate (tokens/s after its first token)
	// at p5 and p50, their ratio (predictability: 1 is perfectly steady)
	// and the coefficient of variation.
	TPS      [2]Estimate `json:"tps_p5_p50"`
	TPSRatio Estimate    `json:"tps_p5_over_p50"`
	TPSCV    Estimate    `json:"tps_cv"`
	// Good is the share of requests that met both SLOs (goodput);
	// Errors the share that failed.
	Good   Estimate `json:"good_fraction"`
	Errors Estimate `json:"error_rate"`
	// HitRate is the GPUs' prefix-cache hit rate (tokens) over the runs,
	// per seed; Value is their mean. No interval: it is one counter.
	HitRate Estimate `json:"prefix_hit_rate"`
	// Throughput is the completed requests per second of arrival span,
	// mean over seeds.
	Throughput float64 `json:"throughput"`
}

var latencyPcts = [3]float64{50, 90, 99}

// reqStat is one measured request reduced to what the figures need.
type reqStat struct {
	ok, good   bool
	ttft, e2e  float64 // ms
	tps        float64 // 0: none (under two tokens)
	itl        []itlBin
	itlGapsRaw []float64 // ms, for the point estimate
}

// itlBin counts a request's inter-token gaps in one log bucket.
type itlBin struct {
	bucket uint16
	n      uint32
}

// The ITL histogram's buckets: 5 % wide from 0.01 ms. Its percentiles are
// exact to the bucket (5 %); the point estimates use the exact gaps.
const (
	itlBase    = 0.01
	itlGrowth  = 1.05
	itlBuckets = 600
)

func itlBucket(ms float64) uint16 {
	if ms <= itlBase {
		return 0
	}
	b := int(math.Log(ms/itlBase) / math.Log(itlGrowth))
	return uint16(min(max(b, 0), itlBuckets-1))
}

func itlBucketValue(b int) float64 { return itlBase * math.Pow(itlGrowth, float64(b)+0.5) }

func newReqStat(r loadgen.Result, slo SLO) reqStat {
	s := reqStat{ok: r.OK()}
	if !s.ok {
		return s
	}
	s.good = slo.Good(r)
	s.ttft, s.e2e = Ms(r.TTFT), Ms(r.Latency)
	s.tps = r.TokensPerSecond()
	if len(r.ITLs) > 0 {
		s.itlGapsRaw = make([]float64, len(r.ITLs))
		counts := map[uint16]uint32{}
		for i, g := range r.ITLs {
			v := Ms(g)
			s.itlGapsRaw[i] = v
			counts[itlBucket(v)]++
		}
		for b, n := range counts {
			s.itl = append(s.itl, itlBin{b, n})
		}
	}
	return s
}

// figures computes every figure of one sample of requests, in a fixed
// order: TTFT×3, E2E×3, ITL×3, TPS p5, p50, ratio, CV, good, errors.
// exactITL uses the raw gaps (point estimates) instead of the histogram.
func figures(rs []reqStat, exactITL bool, scratch *figScratch) []float64 {
	sc := scratch
	sc.ttft, sc.e2e, sc.tps, sc.gaps = sc.ttft[:0], sc.e2e[:0], sc.tps[:0], sc.gaps[:0]
	clear(sc.hist[:])
	good, errs, nITL := 0, 0, 0
	for _, r := range rs {
		if !r.ok {
			errs++
			continue
		}
		if r.good {
			good++
		}
		sc.ttft = append(sc.ttft, r.ttft)
		sc.e2e = append(sc.e2e, r.e2e)
		if r.tps > 0 {
			sc.tps = append(sc.tps, r.tps)
		}
		if exactITL {
			sc.gaps = append(sc.gaps, r.itlGapsRaw...)
		} else {
			for _, b := range r.itl {
				sc.hist[b.bucket] += int(b.n)
				nITL += int(b.n)
			}
		}
	}
	out := make([]float64, 0, 15)
	slices.Sort(sc.ttft)
	slices.Sort(sc.e2e)
	slices.Sort(sc.tps)
	for _, p := range latencyPcts {
		out = append(out, pct(sc.ttft, p))
	}
	for _, p := range latencyPcts {
		out = append(out, pct(sc.e2e, p))
	}
	for _, p := range latencyPcts {
		if exactITL {
			slices.Sort(sc.gaps)
			out = append(out, pct(sc.gaps, p))
		} else {
			out = append(out, histPct(&sc.hist, nITL, p))
		}
	}
	p5, p50 := pct(sc.tps, 5), pct(sc.tps, 50)
	ratio := 0.0
	if p50 > 0 {
		ratio = p5 / p50
	}
	_, cv := MeanCV(sc.tps)
	n := float64(max(len(rs), 1))
	return append(out, p5, p50, ratio, cv, float64(good)/n, float64(errs)/n)
}

type figScratch struct {
	ttft, e2e, tps, gaps []float64
	hist                 [itlBuckets]int
}

// pct is the nearest-rank percentile of sorted xs (0 when empty).
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[nearestRank(len(sorted), p)-1]
}

func histPct(h *[itlBuckets]int, n int, p float64) float64 {
	if n == 0 {
		return 0
	}
	rank, cum := nearestRank(n, p), 0
	for b, c := range h {
		cum += c
		if cum >= rank {
			return itlBucketValue(b)
		}
	}
	return itlBucketValue(itlBuckets - 1)
}

// Bootstrap computes a setup's Stats from its seeds' measured
// results (GPU time). rng makes the replicates reproducible.
func Bootstrap(strata [][]loadgen.Result, slo SLO, rng *rand.Rand) Stats {
	rs := make([][]reqStat, len(strata))
	blocks := make([]int, len(strata))
	var pooled []reqStat
	for i, s := range strata {
		rs[i] = make([]reqStat, len(s))
		ttft, e2e := make([]float64, len(s)), make([]float64, len(s))
		for k, r := range s {
			rs[i][k] = newReqStat(r, slo)
			ttft[k], e2e[k] = rs[i][k].ttft, rs[i][k].e2e
		}
		blocks[i] = blockLength(ttft, e2e)
		pooled = append(pooled, rs[i]...)
	}
	var sc figScratch
	point := figures(pooled, true, &sc)
	perSeed := make([][]float64, len(rs))
	for i := range rs {
		perSeed[i] = figures(rs[i], true, &sc)
	}
	reps := make([][]float64, Replicates)
	sample := make([]reqStat, 0, len(pooled))
	for b := range reps {
		sample = sample[:0]
		for _, i := range seedDraw(b, len(rs)) {
			sample = appendBlocks(sample, rs[i], blocks[i], rng)
		}
		reps[b] = figures(sample, false, &sc)
	}
	within := make([][]float64, Replicates)
	for b := range within {
		sample = sample[:0]
		for i, s := range rs {
			sample = appendBlocks(sample, s, blocks[i], rng)
		}
		within[b] = figures(sample, false, &sc)
	}
	est := func(k int) Estimate {
		e := Estimate{Value: point[k], reps: make([]float64, len(reps))}
		for b := range reps {
			e.reps[b] = reps[b][k]
		}
		for i := range perSeed {
			e.Seeds = append(e.Seeds, perSeed[i][k])
		}
		e.Lo, e.Hi = interval(e.reps)
		w := make([]float64, len(within))
		for b := range within {
			w[b] = within[b][k]
		}
		wlo, whi := interval(w)
		// The ITL replicates come from 5 % buckets: keep the point inside.
		e.Lo, e.Hi = min(e.Lo, e.Value), max(e.Hi, e.Value)
		e.Within = &[2]float64{min(wlo, e.Value), max(whi, e.Value)}
		return e
	}
	st := Stats{Requests: len(pooled), Blocks: blocks}
	for i := range 3 {
		st.TTFT[i], st.E2E[i], st.ITL[i] = est(i), est(3+i), est(6+i)
	}
	st.TPS[0], st.TPS[1], st.TPSRatio, st.TPSCV = est(9), est(10), est(11), est(12)
	st.Good, st.Errors = est(13), est(14)
	return st
}

// appendBlocks appends one circular moving-block resample of s (as many
// requests as it has, in blocks of length block) to sample.
func appendBlocks(sample, s []reqStat, block int, rng *rand.Rand) []reqStat {
	for n := 0; n < len(s); {
		start := rng.IntN(len(s))
		for k := 0; k < block && n < len(s); k++ {
			sample = append(sample, s[(start+k)%len(s)])
			n++
		}
	}
	return sample
}

// seedDraw is replicate b's draw of seeds: len strata indices, with
// replacement. It depends on b alone, so replicate b of every setup draws
// the same seeds and a ratio of two setups' replicates compares them on
// the same workloads (Ratio).
func seedDraw(b, n int) []int {
	if n == 1 {
		return []int{0}
	}
	rng := rand.New(rand.NewPCG(uint64(b), 0x5eed))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(n)
	}
	return out
}

// interval is the 2.5th and 97.5th percentiles of reps.
func interval(reps []float64) (lo, hi float64) {
	s := slices.Clone(reps)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[int(0.025*float64(len(s)-1)+0.5)], s[int(0.975*float64(len(s)-1)+0.5)]
}

// Ratio is a/b with the interval of the ratio of their replicates,
// which are paired by their seed draw (seedDraw): replicate i of both drew
// the same seeds, so the workload's own spread divides out, while their
// blocks were drawn independently, as the setups ran separately.
func Ratio(a, b Estimate) Estimate {
	r := Estimate{}
	if b.Value != 0 {
		r.Value = a.Value / b.Value
	}
	n := min(len(a.reps), len(b.reps))
	r.reps = make([]float64, 0, n)
	for i := range n {
		if b.reps[i] != 0 {
			r.reps = append(r.reps, a.reps[i]/b.reps[i])
		}
	}
	r.Lo, r.Hi = interval(r.reps)
	for i := range min(len(a.Seeds), len(b.Seeds)) {
		if b.Seeds[i] != 0 {
			r.Seeds = append(r.Seeds, a.Seeds[i]/b.Seeds[i])
		}
	}
	return r
}

// Overlaps reports whether two estimates' intervals overlap.
func (e Estimate) Overlaps(o Estimate) bool { return e.Lo <= o.Hi && o.Lo <= e.Hi }

// Diff is a−b with the interval of the differences of their replicates,
// paired by their seed draw as in Ratio.
func Diff(a, b Estimate) Estimate {
	r := Estimate{Value: a.Value - b.Value}
	n := min(len(a.reps), len(b.reps))
	r.reps = make([]float64, n)
	for i := range n {
		r.reps[i] = a.reps[i] - b.reps[i]
	}
	r.Lo, r.Hi = interval(r.reps)
	if n == 0 {
		r.Lo, r.Hi = r.Value, r.Value
	}
	for i := range min(len(a.Seeds), len(b.Seeds)) {
		r.Seeds = append(r.Seeds, a.Seeds[i]-b.Seeds[i])
	}
	return r
}

// Scale is e with its value, interval, seeds and replicates times f > 0
// (a share in points, f = 100).
func Scale(e Estimate, f float64) Estimate {
	r := Estimate{Value: f * e.Value, Lo: f * e.Lo, Hi: f * e.Hi}
	for _, s := range e.Seeds {
		r.Seeds = append(r.Seeds, f*s)
	}
	r.reps = make([]float64, len(e.reps))
	for i, x := range e.reps {
		r.reps[i] = f * x
	}
	return r
}

// PerSeed is a figure measured once per seed (a run's prefix hit rate) as
// an Estimate: Value is its mean over the seeds, the interval that of the
// mean under Bootstrap's seed level (replicate b draws the seeds
// seedDraw(b)), so that Ratio and Diff pair it with another setup's
// figure on the same seeds. xs must be in the same seed order as the
// figure it is paired with.
func PerSeed(xs []float64) Estimate {
	e := Estimate{Seeds: slices.Clone(xs), reps: make([]float64, Replicates)}
	if len(xs) == 0 {
		return e
	}
	n := float64(len(xs))
	for _, x := range xs {
		e.Value += x / n
	}
	for b := range e.reps {
		for _, i := range seedDraw(b, len(xs)) {
			e.reps[b] += xs[i] / n
		}
	}
	e.Lo, e.Hi = interval(e.reps)
	return e
}
