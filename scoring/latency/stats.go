package latency

import (
	"math"
	"time"
)

// Version names the Stats layout and the features behind it. Stores drop
// contributions that are not Size long and replace stored sums of another
// length with the next contribution, so a new Version comes with a new
// Size: sums of another version would be read as the wrong quantities.
// Version 2 splits the prefill the TTFT waits for into the prefill ahead
// and the request's own, and counts the decode load in requests in flight
// instead of decode tokens.
const Version = 2

// Layout of Stats.Sums, in order:
//
//	TTFT slow regression   (ttftN = 5 features: 22 values)
//	TPOT slow regression   (tpotN = 3 features: 11 values)
//	TTFT fast regression   (22 values)
//	TPOT fast regression   (11 values)
//	TTFT fast correction   (3 values)
//	TPOT fast correction   (3 values)
//
// A regression over n features holds the upper triangle of XᵀWX row by
// row (n(n+1)/2 values), XᵀWy (n values), Σw and Σwy²; a correction holds
// Σw, Σw·r and Σw·r², r being the log of the observed latency over the
// slow fit's prediction. Slow sums are weighted on the slow timescale
// (Config.HalfLife), fast sums and corrections on the fast one
// (Config.FastHalfLife). Targets are in seconds, token features in
// thousands.
const (
	ttftLen  = ttftN*(ttftN+1)/2 + ttftN + 2
	tpotLen  = tpotN*(tpotN+1)/2 + tpotN + 2
	ttftSlow = 0
	tpotSlow = ttftSlow + ttftLen
	ttftFast = tpotSlow + tpotLen
	tpotFast = ttftFast + ttftLen
	ttftCorr = tpotFast + tpotLen
	tpotCorr = ttftCorr + corrSize
	// Size is the length of Stats.Sums.
	Size = tpotCorr + corrSize
)

const corrSize = 3

// Stats are a worker's exponentially decayed sufficient statistics: what a
// store holds per worker and model. An observation made at time t enters
// with weight e^{λ(t−Epoch)} (λ = ln 2 / half-life, one λ per timescale),
// so an observation's contribution never changes once computed and sums
// are additive: replicas add contributions with atomic increments, in any
// order, and every reader fits the same model. The zero Stats is empty.
type Stats struct {
	// Epoch is the time weights are relative to.
	Epoch time.Time
	// Sums has Size values (see the layout above); nil is empty.
	Sums []float64
}

// Config fixes the learning's timescales. Every replica sharing a store
// must use the same Config: it is part of what the sums mean.
type Config struct {
	// HalfLife is the slow timescale, over which the curves (how latency
	// grows with load) are learned. Default 3 minutes.
	HalfLife time.Duration
	// FastHalfLife is the fast timescale of the residual correction, over
	// which a change of the worker's speed is followed. Default 5 s.
	FastHalfLife time.Duration
	// MinSamples is the effective (decayed) observations below which a
	// prediction is Unknown. Default 8.
	MinSamples float64
}

// Defaults of Config.
const (
	DefaultHalfLife     = 3 * time.Minute
	DefaultFastHalfLife = 5 * time.Second
	DefaultMinSamples   = 8
)

// DefaultConfig is the Config with every default.
func DefaultConfig() Config {
	return Config{HalfLife: DefaultHalfLife, FastHalfLife: DefaultFastHalfLife, MinSamples: DefaultMinSamples}
}

func (c Config) withDefaults() Config {
	if c.HalfLife <= 0 {
		c.HalfLife = DefaultHalfLife
	}
	if c.FastHalfLife <= 0 {
		c.FastHalfLife = DefaultFastHalfLife
	}
	if !(c.MinSamples > 0) { // also NaN
		c.MinSamples = DefaultMinSamples
	}
	return c
}

// rates returns λ per second of the slow and the fast timescale.
func (c Config) rates() (slow, fast float64) {
	c = c.withDefaults()
	return math.Ln2 / c.HalfLife.Seconds(), math.Ln2 / c.FastHalfLife.Seconds()
}

// rebaseExponent is the exponent of the newest weight past which a store
// should rebase: e^30 ≈ 1e13 leaves float64 three more orders of magnitude
// of headroom before sums lose the precision of single observations
// against their history. maxExponent bounds the exponent regardless, so a
// store that never rebases degrades (old data weighs too much) rather
// than overflowing.
const (
	rebaseExponent = 30
	maxExponent    = 200
)

// exponent is λ·(t − epoch) clamped to ±maxExponent.
func exponent(rate float64, t, epoch time.Time) float64 {
	x := rate * t.Sub(epoch).Seconds()
	return min(max(x, -maxExponent), maxExponent)
}

// NeedsRebase reports whether a contribution at now would weigh more than
// e^30 relative to the epoch: the store should Rebase to now first.
func (c Config) NeedsRebase(s Stats, now time.Time) bool {
	if s.Epoch.IsZero() {
		return false
	}
	_, fast := c.rates()
	return exponent(fast, now, s.Epoch) > rebaseExponent
}

// Rebase returns s with its weights relative to epoch instead: every slow
// sum scaled by e^{−λ(epoch−s.Epoch)}, every fast sum by its own λ. The
// model fit from the result is the same. A store rebases atomically: the
// new sums and epoch replace the old ones only if the epoch is still the
// one read.
func (c Config) Rebase(s Stats, epoch time.Time) Stats {
	out := Stats{Epoch: epoch}
	if len(s.Sums) == 0 {
		return out
	}
	if s.Epoch.IsZero() {
		s.Epoch = epoch
	}
	slow, fast := c.rates()
	ks := math.Exp(-exponent(slow, epoch, s.Epoch))
	kf := math.Exp(-exponent(fast, epoch, s.Epoch))
	out.Sums = make([]float64, len(s.Sums))
	for i, v := range s.Sums {
		k := ks
		if i >= ttftFast {
			k = kf
		}
		out.Sums[i] = v * k
	}
	return out
}

// Add returns a + b, b first rebased to a's epoch when they differ (an
// empty a takes b's epoch). It is how a store applies a contribution, and
// how the stats of several workers pool (see PriorFrom).
func (c Config) Add(a, b Stats) Stats {
	if len(a.Sums) == 0 {
		return Stats{Epoch: b.Epoch, Sums: append([]float64(nil), b.Sums...)}
	}
	if len(b.Sums) == 0 {
		return a
	}
	if !b.Epoch.Equal(a.Epoch) {
		b = c.Rebase(b, a.Epoch)
	}
	out := Stats{Epoch: a.Epoch, Sums: append([]float64(nil), a.Sums...)}
	for i := range min(len(out.Sums), len(b.Sums)) {
		out.Sums[i] += b.Sums[i]
	}
	return out
}

// Observation is one request's measured latency on a worker, with the
// features the router saw when it placed the request there.
type Observation struct {
	// At is when the measurement was made (first token, or end of stream).
	At       time.Time
	Features Features
	// TTFT is the measured time to first token; 0 when not measured.
	TTFT time.Duration
	// TPOT is the measured mean time per output token after the first;
	// 0 when not measured (fewer than two tokens, or not streamed).
	TPOT time.Duration
}

// maxLogRatio bounds one residual in the correction: an observation 20
// times off the fit moves it no more than one 20 times off.
var maxLogRatio = math.Log(20)

// Contribution is what o adds to the stats a model was fit from: Sums to
// add element by element when the store's epoch is m.Epoch (else Add
// rebases them). m is the model the replica predicts with, fit from the
// shared stats: the fast correction learns the residuals of its slow fit.
// An observation with no finite positive measurement contributes nothing
// (Sums nil).
func (c Config) Contribution(m Model, o Observation) Stats {
	out := Stats{Epoch: m.Epoch}
	ttft, tpot := seconds(o.TTFT), seconds(o.TPOT)
	if ttft == 0 && tpot == 0 {
		return out
	}
	if out.Epoch.IsZero() {
		out.Epoch = o.At
	}
	slow, fast := c.rates()
	ws := math.Exp(exponent(slow, o.At, out.Epoch))
	wf := math.Exp(exponent(fast, o.At, out.Epoch))
	out.Sums = make([]float64, Size)
	if ttft > 0 {
		x := ttftX(o.Features)
		addReg(out.Sums[ttftSlow:tpotSlow], ttftN, x, ttft, ws)
		addReg(out.Sums[ttftFast:tpotFast], ttftN, x, ttft, wf)
		addCorr(out.Sums[ttftCorr:tpotCorr], ttft, m.TTFT.slow(x), wf)
	}
	if tpot > 0 {
		x := tpotX(o.Features)
		addReg(out.Sums[tpotSlow:ttftFast], tpotN, x, tpot, ws)
		addReg(out.Sums[tpotFast:ttftCorr], tpotN, x, tpot, wf)
		addCorr(out.Sums[tpotCorr:Size], tpot, m.TPOT.slow(x), wf)
	}
	return out
}

// seconds is d in seconds, 0 unless positive (a Duration is always finite).
func seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return d.Seconds()
}

func addReg(s []float64, n int, x [maxN]float64, y, w float64) {
	k := 0
	for i := range n {
		for j := i; j < n; j++ {
			s[k] += w * x[i] * x[j]
			k++
		}
	}
	for i := range n {
		s[k+i] += w * x[i] * y
	}
	s[k+n] += w
	s[k+n+1] += w * y * y
}

func addCorr(s []float64, y, predicted, w float64) {
	r := math.Log(y / max(predicted, minSeconds))
	r = min(max(r, -maxLogRatio), maxLogRatio)
	s[0] += w
	s[1] += w * r
	s[2] += w * r * r
}
