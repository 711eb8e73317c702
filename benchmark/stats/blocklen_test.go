package stats

import (
	"math/rand/v2"
	"testing"
)

func ar1(n int, phi float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float64, n)
	for i := 1; i < n; i++ {
		x[i] = phi*x[i-1] + rng.NormFloat64()
	}
	return x
}

func TestBlockLengthFollowsTheCorrelation(t *testing.T) {
	iid := blockLength(ar1(3000, 0, 1))
	mild := blockLength(ar1(3000, 0.5, 2))
	strong := blockLength(ar1(3000, 0.95, 3))
	if iid > 5 {
		t.Errorf("independent series: block %d, want at most 5", iid)
	}
	if iid > mild || mild >= strong {
		t.Errorf("blocks iid %d, phi 0.5 %d, phi 0.95 %d: want increasing", iid, mild, strong)
	}
	// For an AR(1) the optimal circular block is (2·G²/D)^(1/3)·n^(1/3)
	// with G/γ = 2φ/(1-φ)² and D/γ² = (4/3)((1+φ)/(1-φ))², i.e.
	// (6φ²/(1-φ²)²)^(1/3)·n^(1/3): 120 for φ 0.95 at n = 3,000. The
	// estimate from one sample runs lower (the flat-top window truncates);
	// accept half of it up to the bound.
	if strong < 60 || strong > 165 {
		t.Errorf("phi 0.95: block %d, want about 120", strong)
	}
	if b := blockLength(ar1(3000, 0.999, 4)); b > 165 {
		t.Errorf("near unit root: block %d exceeds the 3·sqrt(n) bound", b)
	}
	if b := blockLength([]float64{1, 2, 3}); b != 1 {
		t.Errorf("tiny series: block %d", b)
	}
}
