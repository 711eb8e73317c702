package latency

import (
	"math"
	"time"
)

// Prior is what a worker is predicted from before it has history, and what
// the fit is regularised toward: ridge regression toward these
// coefficients, each weighing as much as Strength observations at a busy
// worker's typical feature value. The fit therefore never divides by an
// unseen quantity: with no observations it is the prior, and with all of
// them at one load it learns the level there and keeps the prior's slopes.
type Prior struct {
	// TTFT are seconds for [1, Q, U, R, (Q + U)·R]: a fixed part, per
	// thousand tokens of prefill ahead (Q) and of the request's own
	// uncached prompt (U), per request in flight (R), and per thousand
	// prefill tokens and request (the running sequences' slowing of every
	// prefill step).
	TTFT [ttftN]float64
	// TPOT are seconds for [1, R, T]: a fixed part, per sequence, per
	// thousand tokens in flight.
	TPOT [tpotN]float64
	// Strength is the prior's weight in pseudo-observations.
	Strength float64
}

// DefaultPrior is a deliberately slow GPU, so that a worker with no history
// is never promised more than it can do; its data soon moves it (a few
// dozen observations outweigh it). The figures are those of an A40 serving
// Llama-2-7B (profiled step times, vidur, tensor parallel 1; the slowest
// GPU and the largest KV per token in the reference profiles), with the
// host's 3 ms a step:
//
//   - TTFT: 50 ms fixed (the step in progress, then the request's own); 150
//     ms per thousand prefill tokens (a full 512-token chunked-prefill step
//     takes 71 ms of linear layers plus the host's 3 ms), ahead or its own
//     (a bound: part of the prefill ahead is already done). A running
//     sequence of a thousand tokens of context takes one budget token
//     (0.14 ms), 0.75 ms of KV reads (0.75 µs a token) and 40 µs of host
//     work in every step, about 0.9 ms; so 1.3 ms a request in flight (half
//     the step in progress and the request's last), and 1.8 ms a request
//     and thousand prefill tokens (two prefill steps a thousand tokens).
//   - TPOT: 27 ms fixed (a one-token step, 24 ms, plus the host); 0.1 ms a
//     sequence (40 µs of host work, the rest linear-layer growth with the
//     batch); 0.75 ms per thousand tokens in flight (512 KiB of KV per
//     token read at 0.7 TB/s every step).
func DefaultPrior() Prior {
	return Prior{
		TTFT:     [ttftN]float64{0.050, 0.150, 0.150, 0.0013, 0.0018},
		TPOT:     [tpotN]float64{0.027, 0.0001, 0.00075},
		Strength: 4,
	}
}

// PriorFrom is a prior with m's coefficients: given a model fit from the
// pooled stats of a model's other workers (Config.Add), a new worker starts
// from the fleet's curves instead of the generic ones. Fleets are
// heterogeneous, so keep strength small: it is only a starting point.
func PriorFrom(m Model, strength float64) Prior {
	p := Prior{Strength: strength}
	copy(p.TTFT[:], m.TTFT.Slow[:])
	copy(p.TPOT[:], m.TPOT.Slow[:])
	return p
}

// corrPseudo is the fast correction's pseudo-count of observations with no
// residual: a single observation cannot swing the prediction on its own.
const corrPseudo = 2

// Fit is the model of a worker at now from its stats. Per target: the slow
// fit, weighted least squares with every weight decayed to now,
// regularised toward the prior; the fast correction, from the recent
// residuals over the slow fit; and the fast fit, regularised toward the
// slow fit times the correction, which predictions use. Every coefficient
// is constrained non-negative (latency never falls as load grows). Stats
// of the wrong length or with a non-finite or negative weight are
// ignored: the model is the prior.
func Fit(c Config, s Stats, p Prior, now time.Time) Model {
	c = c.withDefaults()
	m := Model{Epoch: s.Epoch}
	p = p.sanitised()
	if !valid(s.Sums) {
		s.Sums = make([]float64, Size)
	}
	slow, fast := c.rates()
	ks, kf := 1.0, 1.0
	if !s.Epoch.IsZero() {
		ks = math.Exp(-exponent(slow, now, s.Epoch))
		kf = math.Exp(-exponent(fast, now, s.Epoch))
	}
	var pt, pp [maxN]float64
	copy(pt[:], p.TTFT[:])
	copy(pp[:], p.TPOT[:])
	m.TTFT = fitTarget(s.Sums[ttftSlow:tpotSlow], s.Sums[ttftFast:tpotFast], s.Sums[ttftCorr:tpotCorr], ttftN, ks, kf, pt, ttftTypical, p.Strength, c.MinSamples)
	m.TPOT = fitTarget(s.Sums[tpotSlow:ttftFast], s.Sums[tpotFast:ttftCorr], s.Sums[tpotCorr:Size], tpotN, ks, kf, pp, tpotTypical, p.Strength, c.MinSamples)
	return m
}

func valid(sums []float64) bool {
	if len(sums) != Size {
		return false
	}
	for _, v := range sums {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	for _, at := range []int{tpotSlow - 2, ttftFast - 2, tpotFast - 2, ttftCorr - 2, ttftCorr, tpotCorr} {
		if sums[at] < 0 {
			return false
		}
	}
	return true
}

// sanitised replaces what a prior cannot be (negative, non-finite) by the
// default's figures.
func (p Prior) sanitised() Prior {
	d := DefaultPrior()
	ok := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
	for i := range p.TTFT {
		if !ok(p.TTFT[i]) {
			p.TTFT[i] = d.TTFT[i]
		}
	}
	for i := range p.TPOT {
		if !ok(p.TPOT[i]) {
			p.TPOT[i] = d.TPOT[i]
		}
	}
	if !(p.Strength > 0) || math.IsInf(p.Strength, 0) {
		p.Strength = d.Strength
	}
	return p
}

// ridge is one regression's weighted least squares from its sums (each
// weight times k), regularised toward prior with strength pseudo-
// observations at the typical feature values, with non-negative
// coefficients; the prior when the system cannot be solved.
func ridge(reg []float64, n int, k float64, prior [maxN]float64, typical [maxN]float64, strength float64) (coef [maxN]float64, samples, rmse float64) {
	var a, data [maxN][maxN]float64
	var b, xty [maxN]float64
	at := 0
	for i := range n {
		for j := i; j < n; j++ {
			data[i][j] = k * reg[at]
			data[j][i] = data[i][j]
			at++
		}
	}
	for i := range n {
		xty[i] = k * reg[at+i]
	}
	samples, swy2 := k*reg[at+n], k*reg[at+n+1]
	usable := allFinite(samples, swy2) && allFinite(xty[:n]...)
	for i := range n {
		usable = usable && allFinite(data[i][:n]...)
	}
	if !usable {
		return prior, 0, 0 // sums too large to use: as if there were none
	}
	a, b = data, xty
	for i := range n {
		lam := strength * typical[i] * typical[i]
		a[i][i] += lam
		b[i] += lam * prior[i]
	}
	coef, ok := solveNonneg(a, b, n)
	if !ok {
		coef = prior
	}
	if samples > 0 {
		rss := swy2
		for i := range n {
			rss -= 2 * coef[i] * xty[i]
			for j := range n {
				rss += coef[i] * data[i][j] * coef[j]
			}
		}
		rmse = math.Sqrt(max(rss, 0) / samples)
	}
	if !finite(rmse) {
		rmse = 0
	}
	return coef, samples, rmse
}

// correction is the geometric mean of the recent residuals over the slow
// fit, shrunk toward 1 by a pseudo-count and by its own noise: a mean
// within a standard error of 0 moves nothing.
func correction(corr []float64, k float64) float64 {
	w := k * corr[0]
	if !(w > 0) || !allFinite(w, k*corr[1], k*corr[2]) {
		return 1
	}
	mean := corr[1] / corr[0]
	spread := max(corr[2]/corr[0]-mean*mean, 0)
	c := k * corr[1] / (w + corrPseudo)
	if c != 0 {
		c *= max(0, 1-spread/w/(c*c))
	}
	return math.Exp(min(max(c, -maxLogRatio), maxLogRatio))
}

func fitTarget(slowReg, fastReg, corr []float64, n int, ks, kf float64, prior, typical [maxN]float64, strength, minSamples float64) Regression {
	var r Regression
	r.Slow, r.Samples, r.RMSE = ridge(slowReg, n, ks, prior, typical, strength)
	r.Correction = correction(corr, kf)
	var scaled [maxN]float64
	for i := range n {
		scaled[i] = r.Slow[i] * r.Correction
	}
	r.Coef, r.Recent, _ = ridge(fastReg, n, kf, scaled, typical, fastStrength)
	r.Unknown = !(r.Samples >= minSamples)
	return r
}

// fastStrength is the weight, in pseudo-observations, of the slow fit
// (scaled by the correction) as the fast fit's prior: at a worker's usual
// traffic the fast timescale holds a few dozen observations, enough to
// reshape the curves where the load is now, while a quiet worker's fast
// fit stays the slow one.
const fastStrength = 10

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func allFinite(vs ...float64) bool {
	for _, v := range vs {
		if !finite(v) {
			return false
		}
	}
	return true
}

// solveNonneg solves a·x = b (a symmetric positive definite, n ≤ maxN)
// with x ≥ 0: whenever the solution has a negative coefficient, the most
// negative is fixed at 0 and the rest re-solved. ok is false when a is not
// positive definite or the result is not finite.
func solveNonneg(a [maxN][maxN]float64, b [maxN]float64, n int) (x [maxN]float64, ok bool) {
	var fixed [maxN]bool
	for range n {
		var buf [maxN]int
		idx := buf[:0]
		for i := range n {
			if !fixed[i] {
				idx = append(idx, i)
			}
		}
		sol, ok := cholesky(a, b, idx)
		if !ok {
			return x, false
		}
		worst, at := 0.0, -1
		for k, i := range idx {
			if sol[k] < worst {
				worst, at = sol[k], i
			}
		}
		if at < 0 {
			x = [maxN]float64{}
			for k, i := range idx {
				x[i] = sol[k]
			}
			return x, true
		}
		fixed[at] = true //nolint:gosec // at is one of idx, all below n ≤ maxN
	}
	return [maxN]float64{}, true // every coefficient fixed at 0
}

// cholesky solves the subsystem of a·x = b on the indices idx.
func cholesky(a [maxN][maxN]float64, b [maxN]float64, idx []int) ([maxN]float64, bool) {
	n := len(idx)
	var l [maxN][maxN]float64
	for i := range n {
		for j := 0; j <= i; j++ {
			s := a[idx[i]][idx[j]]
			for k := range j {
				s -= l[i][k] * l[j][k]
			}
			if i == j {
				if !(s > 0) || !finite(s) {
					return [maxN]float64{}, false
				}
				l[i][i] = math.Sqrt(s)
			} else {
				l[i][j] = s / l[j][j]
			}
		}
	}
	var y, x [maxN]float64
	for i := range n {
		s := b[idx[i]]
		for k := range i {
			s -= l[i][k] * y[k]
		}
		y[i] = s / l[i][i]
	}
	for i := n - 1; i >= 0; i-- {
		s := y[i]
		for k := i + 1; k < n; k++ {
			s -= l[k][i] * x[k]
		}
		x[i] = s / l[i][i]
	}
	for i := range n {
		if !finite(x[i]) {
			return [maxN]float64{}, false
		}
	}
	return x, true
}
