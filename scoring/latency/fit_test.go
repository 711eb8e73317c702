package latency

import (
	"math"
	"testing"
	"time"
)

var probes = []Features{
	{},
	{Uncached: 500, Output: 100},
	{Running: 20, PrefillTokens: 3000, DecodeTokens: 6000, Uncached: 1000, Output: 200},
	{Running: 100, PrefillTokens: 8000, DecodeTokens: 60000, Uncached: 2000, Output: 200},
}

// dotPrior is the prior's prediction, in seconds, at x.
func dotPrior(c []float64, x [maxN]float64) float64 {
	v := 0.0
	for i := range c {
		v += c[i] * x[i]
	}
	return v
}

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) || math.Abs(a-b) < 1e-300
}

// With no history, or history a store cannot vouch for, a worker is
// predicted from the prior and marked unknown.
func TestNoHistoryIsThePrior(t *testing.T) {
	cfg, p := DefaultConfig(), DefaultPrior()
	junk := func(f func([]float64)) Stats {
		s := make([]float64, Size)
		for i := range s {
			s[i] = 1
		}
		f(s)
		return Stats{Epoch: t0, Sums: s}
	}
	for _, tc := range []struct {
		name  string
		stats Stats
	}{
		{"empty", Stats{}},
		{"empty with an epoch", Stats{Epoch: t0}},
		{"wrong length", Stats{Epoch: t0, Sums: make([]float64, Size-1)}},
		{"NaN", junk(func(s []float64) { s[3] = math.NaN() })},
		{"Inf", junk(func(s []float64) { s[Size-1] = math.Inf(1) })},
		{"negative weight", junk(func(s []float64) { s[tpotSlow-2] = -1 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Fit(cfg, tc.stats, p, t0.Add(time.Minute))
			if !m.TTFT.Unknown || !m.TPOT.Unknown || !m.Unknown() {
				t.Fatalf("known with no history: %+v", m)
			}
			for _, f := range probes {
				want := dotPrior(p.TTFT[:], ttftX(f))
				if got := m.PredictTTFT(f); !got.Unknown || !near(got.Value.Seconds(), want, 1e-6) {
					t.Fatalf("TTFT at %+v: %v, want the prior's %v s, unknown", f, got, want)
				}
				want = dotPrior(p.TPOT[:], tpotX(f))
				if got := m.PredictTPOT(f); !got.Unknown || !near(got.Value.Seconds(), want, 1e-6) {
					t.Fatalf("TPOT at %+v: %v, want the prior's %v s, unknown", f, got, want)
				}
			}
		})
	}
}

// All observations at one load (a singular XᵀX) still give a sensible
// model: the level there is learned, the slopes stay the prior's.
func TestOneLoadOnly(t *testing.T) {
	cfg, p := DefaultConfig(), DefaultPrior()
	f := Features{Running: 4, PrefillTokens: 1000, DecodeTokens: 800, Uncached: 1000, Output: 200}
	l := newLearner(cfg, p, t0)
	for i := range 200 {
		l.observe(Observation{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Features: f, TTFT: 100 * time.Millisecond, TPOT: 12 * time.Millisecond})
	}
	m := l.model
	if m.Unknown() {
		t.Fatalf("unknown after 200 observations: %+v", m)
	}
	if got := m.PredictTTFT(f).Value; !near(got.Seconds(), 0.1, 0.05) {
		t.Fatalf("TTFT at the observed load %v, want 100ms", got)
	}
	if got := m.PredictTPOT(f).Value; !near(got.Seconds(), 0.012, 0.05) {
		t.Fatalf("TPOT at the observed load %v, want 12ms", got)
	}
	// Elsewhere: finite, growing with load, and not wild.
	heavier := f
	heavier.PrefillTokens, heavier.DecodeTokens, heavier.Running = 20000, 40000, 100
	for _, tc := range []struct {
		name        string
		light, busy time.Duration
	}{
		{"TTFT", m.PredictTTFT(f).Value, m.PredictTTFT(heavier).Value},
		{"TPOT", m.PredictTPOT(f).Value, m.PredictTPOT(heavier).Value},
	} {
		if tc.busy <= tc.light || tc.busy > 100*tc.light {
			t.Fatalf("%s: %v at the observed load, %v far heavier: want more, not wildly more", tc.name, tc.light, tc.busy)
		}
	}
}

// Coefficients are never negative, so predictions never fall as load
// grows and adding a request never speeds the others up, even when the
// data would have a slope fall.
func TestMonotoneInLoad(t *testing.T) {
	cfg, p := DefaultConfig(), DefaultPrior()
	l := newLearner(cfg, p, t0)
	for i := range 400 {
		// Latency that falls with load: nonsense a fit must not follow.
		load := i % 20
		f := Features{Running: load, PrefillTokens: 500 * load, DecodeTokens: 1000 * load, Uncached: 500, Output: 100}
		l.observe(Observation{
			At: t0.Add(time.Duration(i) * 50 * time.Millisecond), Features: f,
			TTFT: time.Duration(400-15*load) * time.Millisecond, TPOT: time.Duration(40-load) * time.Millisecond,
		})
	}
	m := l.model
	for _, c := range [][maxN]float64{m.TTFT.Coef, m.TTFT.Slow, m.TPOT.Coef, m.TPOT.Slow} {
		for _, v := range c {
			if v < 0 {
				t.Fatalf("negative coefficient in %+v", m)
			}
		}
	}
	prev := Features{Uncached: 500, Output: 100}
	for load := 1; load < 50; load++ {
		f := Features{Running: load, PrefillTokens: 500 * load, DecodeTokens: 1000 * load, Uncached: 500, Output: 100}
		if m.PredictTTFT(f).Value < m.PredictTTFT(prev).Value || m.PredictTPOT(f).Value < m.PredictTPOT(prev).Value {
			t.Fatalf("prediction fell from load %d to %d", load-1, load)
		}
		if m.TPOTDelta(f).Value < 0 {
			t.Fatalf("negative TPOT delta at load %d", load)
		}
		prev = f
	}
}

// TPOTDelta is what the request adds to the running requests' TPOT: the
// model's TPOT with the request's sequence and tokens minus without.
func TestTPOTDelta(t *testing.T) {
	m := Fit(DefaultConfig(), Stats{}, DefaultPrior(), t0)
	p := DefaultPrior().TPOT
	for _, tc := range []struct {
		name string
		f    Features
		want float64 // seconds
	}{
		{"idle worker", Features{Uncached: 1000, Output: 1000}, p[1] + 2*p[2]},
		{"busy worker", Features{Running: 50, PrefillTokens: 9000, DecodeTokens: 20000, Uncached: 3000, Output: 1000}, p[1] + 4*p[2]},
		{"empty request", Features{Running: 3}, p[1]},
	} {
		if got := m.TPOTDelta(tc.f).Value.Seconds(); !near(got, tc.want, 1e-6) {
			t.Fatalf("%s: delta %v s, want %v s", tc.name, got, tc.want)
		}
	}
}

// A prior with impossible figures falls back to the default's, figure by
// figure.
func TestPriorSanitised(t *testing.T) {
	bad := DefaultPrior()
	bad.TTFT[1], bad.TPOT[0], bad.Strength = -1, math.Inf(1), math.NaN()
	m := Fit(DefaultConfig(), Stats{}, bad, t0)
	d := DefaultPrior()
	if m.TTFT.Slow[1] != d.TTFT[1] || m.TPOT.Slow[0] != d.TPOT[0] || m.TTFT.Slow[0] != d.TTFT[0] {
		t.Fatalf("coefficients %+v, want the default's in place of the impossible ones", m)
	}
}
