package latency

import (
	"math"
	"time"
)

// Model is a worker's fitted latency model at one time: what a replica
// predicts with until it fits again.
type Model struct {
	TTFT, TPOT Regression
	// Epoch is the epoch of the stats the model was fit from, which its
	// contributions are relative to (see Config.Contribution).
	Epoch time.Time
}

// Regression is one target's fit.
type Regression struct {
	// Coef are the coefficients predictions use, in seconds (see Prior
	// for what each multiplies), all non-negative: the fast fit.
	Coef [maxN]float64
	// Slow are the slow fit's coefficients: the worker's curves.
	Slow [maxN]float64
	// Correction is the recent residuals' geometric mean over the slow
	// fit, on the fast timescale, shrunk toward 1.
	Correction float64
	// Recent is the effective observations on the fast timescale.
	Recent float64
	// Samples is the effective number of observations behind Coef:
	// their weights decayed to the time of the fit.
	Samples float64
	// RMSE is the slow fit's weighted root mean square residual, seconds.
	RMSE float64
	// Unknown: fewer than Config.MinSamples effective observations, so
	// Coef is mostly the prior.
	Unknown bool
}

// Bounds of every prediction: no latency is predicted above a day, and
// residuals are taken against at least 0.1 ms.
const (
	minSeconds = 1e-4
	maxSeconds = 86400
)

// slow is the slow fit's prediction at x.
func (r Regression) slow(x [maxN]float64) float64 { return dot(r.Slow, x) }

// at is the prediction in seconds.
func (r Regression) at(x [maxN]float64) float64 { return dot(r.Coef, x) }

// dot is c·x in [minSeconds, maxSeconds].
func dot(c, x [maxN]float64) float64 {
	v := 0.0
	for i := range maxN {
		v += c[i] * x[i]
	}
	if !(v >= minSeconds) { // also NaN
		return minSeconds
	}
	return min(v, maxSeconds)
}

// Prediction is a predicted latency.
type Prediction struct {
	// Value is never negative and at most a day.
	Value time.Duration
	// Unknown: the worker has too little history and Value comes mostly
	// from the prior (or from a fleet prior: see PriorFrom).
	Unknown bool
}

func prediction(sec float64, unknown bool) Prediction {
	return Prediction{Value: time.Duration(math.Round(sec * float64(time.Second))), Unknown: unknown}
}

// PredictTTFT is the time to first token of the request f describes, on
// the worker whose load f describes.
func (m Model) PredictTTFT(f Features) Prediction {
	return prediction(m.TTFT.at(ttftX(f)), m.TTFT.Unknown)
}

// PredictTPOT is the time per output token of the request f describes once
// it runs on the worker beside the load f describes.
func (m Model) PredictTPOT(f Features) Prediction {
	return prediction(m.TPOT.at(tpotX(f)), m.TPOT.Unknown)
}

// TPOTDelta is how much placing the request slows the worker's running
// requests: their TPOT with it minus without it (never negative, since
// every coefficient is non-negative).
func (m Model) TPOTDelta(f Features) Prediction {
	with, without := m.TPOT.at(tpotX(f)), m.TPOT.at(tpotXWithout(f))
	return prediction(max(with-without, 0), m.TPOT.Unknown)
}

// Unknown reports whether either target has too little history.
func (m Model) Unknown() bool { return m.TTFT.Unknown || m.TPOT.Unknown }
