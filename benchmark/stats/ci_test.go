package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// synthetic results: TTFT exponential with the given mean, every request
// OK with 10 tokens 20 ms apart.
func synthetic(n int, meanMs float64, seed uint64) []loadgen.Result {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]loadgen.Result, n)
	for i := range out {
		ttft := time.Duration(rng.ExpFloat64() * meanMs * float64(time.Millisecond))
		itl := make([]time.Duration, 9)
		for k := range itl {
			itl[k] = 20 * time.Millisecond
		}
		out[i] = loadgen.Result{Status: 200, TTFT: ttft, Latency: ttft + 180*time.Millisecond, Tokens: 10, ITLs: itl}
	}
	return out
}

func TestBootstrapIntervalCoversTheTruth(t *testing.T) {
	// The p90 of an exponential of mean 100 ms is 100·ln(10) = 230 ms.
	const truth = 230.26
	covered := 0
	for trial := range 20 {
		strata := [][]loadgen.Result{synthetic(1000, 100, uint64(3*trial)), synthetic(1000, 100, uint64(3*trial+1)), synthetic(1000, 100, uint64(3*trial+2))}
		st := Bootstrap(strata, DefaultSLO(), rand.New(rand.NewPCG(uint64(trial), 9)))
		p90 := st.TTFT[1]
		if p90.Lo > p90.Value || p90.Hi < p90.Value || len(p90.Seeds) != 3 {
			t.Fatalf("interval %+v does not hold its point or seeds", p90)
		}
		if p90.Lo <= truth && truth <= p90.Hi {
			covered++
		}
		if w := (p90.Hi - p90.Lo) / p90.Value; w > 0.25 {
			t.Errorf("p90 interval %.0f%% wide with 3,000 requests", 100*w)
		}
	}
	// A 95 % interval covers the truth about 19 times in 20; 15 allows for
	// the nearest-rank percentile's bias and bad luck.
	if covered < 15 {
		t.Errorf("covered the true p90 in %d of 20 trials", covered)
	}
}

func TestBootstrapFiguresAndErrors(t *testing.T) {
	rs := synthetic(500, 100, 1)
	for i := range 50 {
		rs[i] = loadgen.Result{Status: 503, Err: ""}
	}
	st := Bootstrap([][]loadgen.Result{rs}, DefaultSLO(), rand.New(rand.NewPCG(1, 2)))
	if st.Errors.Value != 0.1 {
		t.Errorf("error rate %v, want 0.1", st.Errors.Value)
	}
	if st.ITL[2].Value != 20 || st.ITL[0].Lo > 20 || st.ITL[0].Hi < 20 {
		t.Errorf("ITL %+v, want 20 ms", st.ITL)
	}
	if st.TPSRatio.Value != 1 || st.TPS[1].Value != 50 {
		t.Errorf("tokens/s p50 %v ratio %v, want 50 and 1", st.TPS[1].Value, st.TPSRatio.Value)
	}
	if st.Good.Value < 0.5 || st.Good.Value > 0.9 {
		t.Errorf("good %v", st.Good.Value)
	}
}

func TestRatio(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	fast := Bootstrap([][]loadgen.Result{synthetic(1500, 50, 1)}, DefaultSLO(), rng)
	slow := Bootstrap([][]loadgen.Result{synthetic(1500, 200, 2)}, DefaultSLO(), rng)
	r := Ratio(fast.TTFT[1], slow.TTFT[1])
	if r.Value < 0.2 || r.Value > 0.3 || r.Lo > r.Value || r.Hi < r.Value {
		t.Fatalf("ratio %+v, want about 0.25", r)
	}
	same := Ratio(fast.TTFT[1], fast.TTFT[1])
	if !same.Overlaps(Estimate{Value: 1, Lo: 1, Hi: 1}) {
		t.Errorf("a figure over itself: %+v", same)
	}
}

func TestDiffAndScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	fast := Bootstrap([][]loadgen.Result{synthetic(1500, 50, 1)}, DefaultSLO(), rng)
	slow := Bootstrap([][]loadgen.Result{synthetic(1500, 200, 2)}, DefaultSLO(), rng)
	d := Diff(slow.TTFT[1], fast.TTFT[1])
	if want := slow.TTFT[1].Value - fast.TTFT[1].Value; d.Value != want || d.Lo > d.Value || d.Hi < d.Value || d.Lo <= 0 {
		t.Fatalf("diff %+v, want %g with an interval above 0", d, want)
	}
	if same := Diff(fast.TTFT[1], fast.TTFT[1]); same.Value != 0 || same.Lo > 0 || same.Hi < 0 {
		t.Errorf("a figure minus itself: %+v", same)
	}
	if s := Scale(d, 100); s.Value != 100*d.Value || s.Lo != 100*d.Lo || s.Hi != 100*d.Hi || Diff(s, s).Hi != 0 {
		t.Errorf("scaled %+v of %+v", s, d)
	}
}

// Three seeds, the third twice as slow: a workload whose seeds disagree.
func splitSeeds(scale time.Duration) [][]loadgen.Result {
	strata := [][]loadgen.Result{synthetic(1000, 100, 1), synthetic(1000, 100, 2), synthetic(1000, 200, 3)}
	for _, s := range strata {
		for i := range s {
			s[i].TTFT *= scale
			s[i].Latency *= scale
		}
	}
	return strata
}

func TestSeedSpreadWidensTheInterval(t *testing.T) {
	st := Bootstrap(splitSeeds(1), DefaultSLO(), rand.New(rand.NewPCG(1, 1)))
	p90 := st.TTFT[1]
	lo, hi := slices.Min(p90.Seeds), slices.Max(p90.Seeds)
	// Within each seed the p90 is known to about ±8 %; the pooled figure
	// (about 300 ms) sits between the seeds' 230 and 460. An interval
	// that resamples only requests stays near 300; one that also draws
	// seeds reaches toward both.
	if p90.Lo > lo*1.1 || p90.Hi < p90.Value+(hi-p90.Value)/3 {
		t.Errorf("p90 %.0f [%.0f, %.0f] with seeds %.0f: the seeds' spread is not in the interval", p90.Value, p90.Lo, p90.Hi, p90.Seeds)
	}
	// Without the seed level the interval stays near the pooled figure.
	if w := p90.Within; w == nil || w[0] < lo*1.1 || w[1] > p90.Value+(hi-p90.Value)/3 {
		t.Errorf("within-seed interval %v around %.0f: it should stay near the pooled figure", w, p90.Value)
	}
	same := Bootstrap([][]loadgen.Result{synthetic(1000, 100, 1), synthetic(1000, 100, 2), synthetic(1000, 100, 3)}, DefaultSLO(), rand.New(rand.NewPCG(1, 1)))
	if w, wSame := p90.Hi-p90.Lo, same.TTFT[1].Hi-same.TTFT[1].Lo; w < 2*wSame {
		t.Errorf("interval %.0f ms wide with disagreeing seeds, %.0f with agreeing ones", w, wSame)
	}
}

func TestRatioPairsTheSeedDraws(t *testing.T) {
	// The same workloads, one setup twice as slow (to the µs that ms
	// keeps): the seeds' spread must divide out of the ratio.
	rng := rand.New(rand.NewPCG(2, 2))
	fast := Bootstrap(splitSeeds(1), DefaultSLO(), rng)
	slow := Bootstrap(splitSeeds(2), DefaultSLO(), rng)
	r := Ratio(fast.TTFT[1], slow.TTFT[1])
	if math.Abs(r.Value-0.5) > 1e-4 || r.Lo < 0.4 || r.Hi > 0.6 {
		t.Errorf("ratio %.3f [%.3f, %.3f], want 0.5 with the seeds' spread divided out", r.Value, r.Lo, r.Hi)
	}
}

func TestSeedDrawDependsOnTheReplicateOnly(t *testing.T) {
	if got := seedDraw(7, 1); !slices.Equal(got, []int{0}) {
		t.Errorf("one seed drew %v", got)
	}
	counts, oneSeed := make([]int, 3), 0
	for b := range 3000 {
		d := seedDraw(b, 3)
		if !slices.Equal(d, seedDraw(b, 3)) {
			t.Fatalf("replicate %d drew %v then %v", b, d, seedDraw(b, 3))
		}
		for _, i := range d {
			counts[i]++
		}
		if d[0] == d[1] && d[1] == d[2] {
			oneSeed++
		}
	}
	// With replacement, a draw is all one seed 3 times in 27 (about 333 of
	// 3,000); a draw without a seed level never is.
	if oneSeed < 250 || oneSeed > 420 {
		t.Errorf("%d of 3,000 draws were one seed thrice, want about 333", oneSeed)
	}
	for i, c := range counts {
		if c < 2700 || c > 3300 {
			t.Errorf("seed %d drawn %d times in 9,000, want about 3,000", i, c)
		}
	}
}

// A per-seed figure: its mean, an interval inside the seeds' range, and a
// paired difference that keeps only what differs seed by seed.
func TestPerSeedPairsTheSeedDraws(t *testing.T) {
	a := PerSeed([]float64{0.50, 0.60, 0.70, 0.55, 0.65})
	if math.Abs(a.Value-0.60) > 1e-12 || a.Lo < 0.50 || a.Hi > 0.70 || a.Lo >= a.Value || a.Hi <= a.Value {
		t.Fatalf("per seed %+v, want 0.60 inside (0.50, 0.70)", a)
	}
	// b is a minus 0.01 in every seed: the seeds' spread must divide out.
	b := PerSeed([]float64{0.49, 0.59, 0.69, 0.54, 0.64})
	d := Diff(b, a)
	if math.Abs(d.Value+0.01) > 1e-12 || math.Abs(d.Lo+0.01) > 1e-9 || math.Abs(d.Hi+0.01) > 1e-9 {
		t.Errorf("paired difference %+v, want −0.01 exactly", d)
	}
	if e := PerSeed(nil); e.Value != 0 || e.Lo != 0 || e.Hi != 0 {
		t.Errorf("no seed: %+v", e)
	}
}
