package latency

import (
	"math"
	"testing"
	"time"
)

// FuzzModel fits stats of any content (as a store might hand back) and
// learns any measurement, then predicts at any features: every prediction
// must be finite, in [0, a day], and the TPOT delta never negative. The
// seed corpus runs with every go test; go test -fuzz=FuzzModel explores.
func FuzzModel(f *testing.F) {
	f.Add(0, 0, 0, 0, 0, 0.0, 0.0, 0.0, int64(0), int64(0), int64(0))
	f.Add(20, 3000, 6000, 1000, 200, 1.0, 0.5, 2.0, int64(time.Minute), int64(time.Second), int64(30*time.Millisecond))
	f.Add(-5, -1, -1, -100, -7, -1.0, -2.0, -3.0, int64(-time.Hour), int64(-time.Second), int64(-1))
	f.Add(math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxFloat64, math.MaxFloat64, math.MaxFloat64, int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(1, 1, 1, 1, 1, math.NaN(), math.Inf(1), math.Inf(-1), int64(math.MinInt64), int64(1), int64(1))
	f.Add(1, 2, 3, 4, 5, 1e300, -1e300, 1e-300, int64(1e15), int64(time.Hour), int64(time.Hour))
	f.Add(100, 8000, 60000, 2000, 200, 0.0, 1e-9, 1e9, int64(400*time.Second), int64(5*time.Millisecond), int64(0))
	f.Add(1, 1, 1, 1, 1, 1e300, 1e300, 1e300, int64(-time.Hour), int64(time.Second), int64(time.Second))
	f.Add(1, 1, 1, 1, 1, 1e300, 1e300, 1e300, int64(time.Hour), int64(time.Second), int64(time.Second))
	f.Fuzz(func(t *testing.T, running, prefill, decode, uncached, output int, s0, s1, s2 float64, age, ttft, tpot int64) {
		cfg := DefaultConfig()
		feat := Features{Running: running, PrefillTokens: prefill, DecodeTokens: decode, Uncached: uncached, Output: output}
		sums := make([]float64, Size)
		for i := range sums {
			sums[i] = [3]float64{s0, s1, s2}[i%3] * float64(i%5)
		}
		now := t0.Add(time.Duration(age))
		for _, s := range []Stats{{}, {Epoch: t0, Sums: sums}, {Epoch: now, Sums: sums[:Size/2]}} {
			m := Fit(cfg, s, DefaultPrior(), now)
			check(t, m, feat)
			o := Observation{At: now, Features: feat, TTFT: time.Duration(ttft), TPOT: time.Duration(tpot)}
			if cfg.NeedsRebase(s, now) {
				s = cfg.Rebase(s, now)
			}
			s = cfg.Add(s, cfg.Contribution(m, o))
			check(t, Fit(cfg, s, DefaultPrior(), now.Add(time.Second)), feat)
		}
	})
}

func check(t *testing.T, m Model, f Features) {
	t.Helper()
	for name, p := range map[string]Prediction{"TTFT": m.PredictTTFT(f), "TPOT": m.PredictTPOT(f), "TPOT delta": m.TPOTDelta(f)} {
		if p.Value < 0 || p.Value > 24*time.Hour {
			t.Fatalf("%s at %+v: %v from %+v", name, f, p.Value, m)
		}
	}
	for _, r := range []Regression{m.TTFT, m.TPOT} {
		for _, v := range []float64{r.Correction, r.Samples, r.Recent, r.RMSE} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite figure in %+v", r)
			}
		}
	}
}
