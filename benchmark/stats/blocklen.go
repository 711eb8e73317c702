package stats

import (
	"cmp"
	"math"
	"slices"
)

// The moving-block bootstrap's block length, chosen from the data.
//
// Requests that arrive close together share a queue, so their latencies
// are correlated; a block must span that correlation or the interval is
// too narrow to hold when the run is repeated. How long the correlation
// lasts depends on the load and the strategy (a capped queue near its
// limit stays slow for hundreds of requests; an idle fleet forgets at
// once), so no fixed length fits every configuration. blockLength uses
// the automatic selection of Politis and White (2004, "Automatic
// block-length selection for the dependent bootstrap"), with the
// correction of Patton, Politis and White (2009) for the circular block
// bootstrap that Bootstrap performs:
//
//	b = (2·G² / D)^(1/3) · n^(1/3),  G = Σ λ(k/M)·|k|·R(k),  D = (4/3)·(Σ λ(k/M)·R(k))²
//
// R is the sample autocovariance, λ the flat-top lag window, and M twice
// the first lag m after which K consecutive autocorrelations are all
// insignificant (|ρ| < 2·sqrt(log10(n)/n), K = max(5, sqrt(log10 n))).
// It runs on the ranks of each latency series (TTFT and E2E), so one huge
// outlier does not dominate the covariances, and a seed's block is the
// larger of the two. Bounds: at least 1, at most min(3·sqrt(n), n/3).
func blockLength(series ...[]float64) int {
	b := 1
	for _, s := range series {
		b = max(b, politisWhite(ranks(s)))
	}
	return b
}

// ranks replaces each value by its rank (ties get the rank of their
// first occurrence in sorted order; enough for a covariance estimate).
func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	out := make([]float64, len(xs))
	for r, i := range idx {
		out[i] = float64(r)
	}
	return out
}

func politisWhite(x []float64) int {
	n := len(x)
	if n < 10 {
		return 1
	}
	nf := float64(n)
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= nf
	kn := max(5, int(math.Ceil(math.Sqrt(math.Log10(nf)))))
	mMax := int(math.Ceil(math.Sqrt(nf))) + kn
	bMax := int(math.Ceil(min(3*math.Sqrt(nf), nf/3)))
	maxLag := min(mMax+kn, n-1)
	acov := make([]float64, maxLag+1)
	for k := 0; k <= maxLag; k++ {
		s := 0.0
		for i := k; i < n; i++ {
			s += (x[i] - mean) * (x[i-k] - mean)
		}
		acov[k] = s / nf
	}
	if acov[0] == 0 {
		return 1
	}
	threshold := 2 * math.Sqrt(math.Log10(nf)/nf)
	// m: the first lag after which kn autocorrelations in a row are
	// insignificant; if none, the largest lag considered.
	m := mMax
	for lag := 0; lag+kn <= maxLag; lag++ {
		quiet := true
		for k := 1; k <= kn; k++ {
			if math.Abs(acov[lag+k]/acov[0]) >= threshold {
				quiet = false
				break
			}
		}
		if quiet {
			m = lag
			break
		}
	}
	bigM := min(max(2*m, 1), mMax, maxLag)
	g, s0 := acov[0], acov[0]
	for k := 1; k <= bigM; k++ {
		w := flatTop(float64(k) / float64(bigM))
		g += 2 * w * float64(k) * acov[k]
		s0 += 2 * w * acov[k]
	}
	g -= acov[0] // the k = 0 term has |k| = 0
	d := 4.0 / 3.0 * s0 * s0
	if d <= 0 || g == 0 {
		return 1
	}
	b := math.Cbrt(2*g*g/d) * math.Cbrt(nf)
	return min(max(int(math.Ceil(b)), 1), bMax)
}

// flatTop is the trapezoidal flat-top lag window of Politis and Romano.
func flatTop(t float64) float64 {
	t = math.Abs(t)
	switch {
	case t <= 0.5:
		return 1
	case t <= 1:
		return 2 * (1 - t)
	default:
		return 0
	}
}
