package latency

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// observations collects what an A100 reports over seconds of traffic.
func observations(seconds float64) []Observation {
	var out []Observation
	e := newSimEngine(a100, 7, t0)
	e.run(seconds, 1.4*a100.rate, varying(a100.rate), func(o Observation) { out = append(out, o) })
	return out
}

func sameSums(t *testing.T, a, b Stats, rel float64) {
	t.Helper()
	if !a.Epoch.Equal(b.Epoch) || len(a.Sums) != len(b.Sums) {
		t.Fatalf("epochs %v and %v, lengths %d and %d", a.Epoch, b.Epoch, len(a.Sums), len(b.Sums))
	}
	for i := range a.Sums {
		if !near(a.Sums[i], b.Sums[i], rel) {
			t.Fatalf("sum %d: %v and %v differ by more than %g relative", i, a.Sums[i], b.Sums[i], rel)
		}
	}
}

// Replicas adding their observations' contributions to one store, in any
// interleaving, with the store rebasing in between, hold the same stats as
// one replica adding them all in order.
func TestAdditiveMerge(t *testing.T) {
	cfg := DefaultConfig()
	obs := observations(60)
	if len(obs) < 200 {
		t.Fatalf("only %d observations", len(obs))
	}
	// Every replica predicts with the same model, so an observation's
	// contribution is the same whoever computes it.
	m := Fit(cfg, Stats{}, DefaultPrior(), t0)
	m.Epoch = t0
	var one Stats
	for _, o := range obs {
		one = cfg.Add(one, cfg.Contribution(m, o))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 5 {
		// Two replicas, each with its share of the observations, take
		// turns at random; the store rebases once midway.
		var queues [2][]Observation
		for _, o := range obs {
			r := rng.IntN(2)
			queues[r] = append(queues[r], o)
		}
		var shared Stats
		rebased := false
		for len(queues[0])+len(queues[1]) > 0 {
			r := rng.IntN(2)
			if len(queues[r]) == 0 {
				r = 1 - r
			}
			o := queues[r][0]
			queues[r] = queues[r][1:]
			shared = cfg.Add(shared, cfg.Contribution(m, o))
			if !rebased && o.At.Sub(t0) > 30*time.Second {
				shared, rebased = cfg.Rebase(shared, o.At), true
			}
		}
		if !rebased {
			t.Fatal("the store never rebased")
		}
		sameSums(t, cfg.Rebase(shared, t0), one, 1e-12)
		at := obs[len(obs)-1].At
		a, b := Fit(cfg, shared, DefaultPrior(), at), Fit(cfg, one, DefaultPrior(), at)
		for _, f := range probes {
			if pa, pb := a.PredictTTFT(f).Value, b.PredictTTFT(f).Value; pa != pb && !near(float64(pa), float64(pb), 1e-9) {
				t.Fatalf("trial %d: TTFT %v from the shared store, %v from one replica", trial, pa, pb)
			}
		}
	}
}

// Rebasing changes what the sums are relative to, not the model.
func TestRebasePreservesFit(t *testing.T) {
	cfg := DefaultConfig()
	l := newLearner(cfg, DefaultPrior(), t0)
	obs := observations(40)
	for _, o := range obs {
		l.observe(o)
	}
	now := obs[len(obs)-1].At
	for _, to := range []time.Time{now, now.Add(-20 * time.Second), now.Add(time.Minute), t0} {
		r := cfg.Rebase(l.stats, to)
		if !r.Epoch.Equal(to) {
			t.Fatalf("rebased epoch %v, want %v", r.Epoch, to)
		}
		a, b := Fit(cfg, l.stats, l.prior, now), Fit(cfg, r, l.prior, now)
		for i := range maxN {
			pairs := [][2]float64{
				{a.TTFT.Coef[i], b.TTFT.Coef[i]},
				{a.TTFT.Slow[i], b.TTFT.Slow[i]},
				{a.TPOT.Coef[i], b.TPOT.Coef[i]},
				{a.TPOT.Slow[i], b.TPOT.Slow[i]},
			}
			for _, c := range pairs {
				if !near(c[0], c[1], 1e-9) {
					t.Fatalf("rebased to %v: coefficient %d %v, was %v", to, i, c[1], c[0])
				}
			}
		}
		if !near(a.TTFT.Samples, b.TTFT.Samples, 1e-9) || !near(a.TTFT.Correction, b.TTFT.Correction, 1e-9) || !near(a.TPOT.Recent, b.TPOT.Recent, 1e-9) {
			t.Fatalf("rebased to %v: %+v, was %+v", to, b, a)
		}
	}
}

// A store rebases before the newest weight passes e^30, which the fast
// timescale reaches first: 30 / (ln 2 / 5 s) ≈ 216 s after the epoch.
func TestNeedsRebase(t *testing.T) {
	cfg := DefaultConfig()
	s := Stats{Epoch: t0, Sums: make([]float64, Size)}
	limit := time.Duration(rebaseExponent / (math.Ln2 / DefaultFastHalfLife.Seconds()) * float64(time.Second))
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{t0, false}, {t0.Add(limit - time.Second), false}, {t0.Add(limit + time.Second), true}, {t0.Add(-time.Hour), false},
	} {
		if got := cfg.NeedsRebase(s, tc.at); got != tc.want {
			t.Fatalf("at epoch+%v: needs rebase %v, want %v", tc.at.Sub(t0), got, tc.want)
		}
	}
	if cfg.NeedsRebase(Stats{}, t0.Add(time.Hour)) {
		t.Fatal("empty stats need no rebase")
	}
	// A store that never rebases still fits a finite model.
	l := newLearner(cfg, DefaultPrior(), t0)
	l.stats = Stats{Epoch: t0}
	for i := range 50 {
		o := Observation{At: t0.Add(time.Duration(i) * time.Hour), Features: probes[2], TTFT: time.Second, TPOT: 50 * time.Millisecond}
		l.stats = cfg.Add(l.stats, cfg.Contribution(l.model, o))
		l.model = Fit(cfg, l.stats, l.prior, o.At)
	}
	if v := l.model.PredictTTFT(probes[2]).Value; v <= 0 || !valid(l.stats.Sums) {
		t.Fatalf("without rebasing: TTFT %v, stats finite %v", v, valid(l.stats.Sums))
	}
}

func TestContribution(t *testing.T) {
	cfg := DefaultConfig()
	m := Fit(cfg, Stats{}, DefaultPrior(), t0)
	for _, tc := range []struct {
		name       string
		o          Observation
		ttft, tpot bool
	}{
		{"nothing measured", Observation{At: t0}, false, false},
		{"negative", Observation{At: t0, TTFT: -time.Second, TPOT: -time.Millisecond}, false, false},
		{"TTFT only", Observation{At: t0, TTFT: time.Second}, true, false},
		{"TPOT only", Observation{At: t0, TPOT: time.Millisecond}, false, true},
		{"both", Observation{At: t0, TTFT: time.Second, TPOT: time.Millisecond}, true, true},
	} {
		c := cfg.Contribution(m, tc.o)
		if !tc.ttft && !tc.tpot {
			if c.Sums != nil {
				t.Fatalf("%s: contributes %v", tc.name, c.Sums)
			}
			continue
		}
		// The epoch of a model fit from empty stats is the observation's.
		if !c.Epoch.Equal(t0) || len(c.Sums) != Size {
			t.Fatalf("%s: epoch %v, %d sums", tc.name, c.Epoch, len(c.Sums))
		}
		for _, seg := range []struct {
			at   int
			want bool
		}{{tpotSlow - 2, tc.ttft}, {ttftFast - 2, tc.tpot}, {tpotFast - 2, tc.ttft}, {ttftCorr - 2, tc.tpot}, {ttftCorr, tc.ttft}, {tpotCorr, tc.tpot}} {
			if got := c.Sums[seg.at] == 1; got != seg.want {
				t.Fatalf("%s: weight at %d is %v", tc.name, seg.at, c.Sums[seg.at])
			}
		}
	}
	// Added to a store at another epoch, a contribution is rebased.
	later := Stats{Epoch: t0.Add(DefaultFastHalfLife), Sums: make([]float64, Size)}
	sum := cfg.Add(later, cfg.Contribution(m, Observation{At: t0, TTFT: time.Second}))
	if !near(sum.Sums[ttftCorr], 0.5, 1e-12) || !near(sum.Sums[tpotSlow-2], math.Exp2(-5.0/180), 1e-12) {
		t.Fatalf("fast weight %v (want 0.5), slow %v", sum.Sums[ttftCorr], sum.Sums[tpotSlow-2])
	}
}

// The layout is a contract with every store: changing the features or the
// sums must come with a new Version, so stores drop sums they would
// misread.
func TestLayoutVersion(t *testing.T) {
	layouts := map[int]int{1: 60, 2: 72} // Version: Size
	if got, ok := layouts[Version]; !ok || got != Size {
		t.Fatalf("Version %d has Size %d: a changed layout needs a new Version (and an entry here)", Version, Size)
	}
}

func BenchmarkFit(b *testing.B) {
	cfg := DefaultConfig()
	l := newLearner(cfg, DefaultPrior(), t0)
	for _, o := range observations(30) {
		l.observe(o)
	}
	now := t0.Add(31 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		Fit(cfg, l.stats, l.prior, now)
	}
}

func BenchmarkPredict(b *testing.B) {
	cfg := DefaultConfig()
	l := newLearner(cfg, DefaultPrior(), t0)
	for _, o := range observations(30) {
		l.observe(o)
	}
	b.ReportAllocs()
	for b.Loop() {
		l.model.PredictTTFT(probe)
		l.model.PredictTPOT(probe)
		l.model.TPOTDelta(probe)
	}
}
