package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring/latency"
)

// This file reports how well the router's latency model (scoring/latency)
// predicted what the simulated engines then did. Every replica fits and
// feeds the model whatever its strategy, and the ticket compares each
// request's predictions, made on the figures its claim read, with what it
// measured (scheduler.Result.TTFTError, TPOTError): the same figures as
// the router's llm_router_prediction_error_ratio, over every request of a
// run instead of a replica's last thousand.

// PredictionErrors are one configuration's absolute relative errors,
// |predicted − measured| / measured, of the latency model's predictions
// on the claimed workers: 0.1 is 10 % off. Each Estimate is a quantile of
// the requests of every seed, with a 95 % interval from a bootstrap that
// draws seeds, then requests within each; Seeds are each seed's own.
type PredictionErrors struct {
	// TTFT and TPOT are the median and the 90th percentile.
	TTFT [2]stats.Estimate `json:"ttft_p50_p90"`
	TPOT [2]stats.Estimate `json:"tpot_p50_p90"`
	// Predictions count the requests behind each target, and Unknown
	// those predicted while the worker's model was still unknown (mostly
	// the prior's figures).
	TTFTPredictions int `json:"ttft_predictions"`
	TPOTPredictions int `json:"tpot_predictions"`
	TTFTUnknown     int `json:"ttft_unknown"`
	TPOTUnknown     int `json:"tpot_unknown"`
}

// predictionTally is what a run keeps of its predictions' errors.
type predictionTally struct {
	ttft, tpot               []float64
	ttftUnknown, tpotUnknown int
}

// record takes a decision's second record, at its end: the errors of the
// predictions made for the worker that served it.
func (p *predictionTally) record(d *scheduler.Decision) {
	r := d.Result
	if r == nil || r.ServedBy != d.Worker || d.Prediction == nil {
		return
	}
	if r.TTFTSeconds > 0 {
		p.ttft = append(p.ttft, r.TTFTError)
		if d.Prediction.TTFTUnknown {
			p.ttftUnknown++
		}
	}
	if r.TPOTSeconds > 0 {
		p.tpot = append(p.tpot, r.TPOTError)
		if d.Prediction.TPOTUnknown {
			p.tpotUnknown++
		}
	}
}

// predictionReps is the bootstrap's replicates: enough for a 95 %
// interval's ends to move by well under a point between seeds of the
// bootstrap itself.
const predictionReps = 400

// summarizePredictions pools the runs' errors; nil when no run measured
// any.
func summarizePredictions(runs []*RunResult, rng *rand.Rand) *PredictionErrors {
	var ttft, tpot [][]float64
	out := &PredictionErrors{}
	for _, r := range runs {
		p := r.Predictions
		ttft, tpot = append(ttft, p.ttft), append(tpot, p.tpot)
		out.TTFTPredictions += len(p.ttft)
		out.TPOTPredictions += len(p.tpot)
		out.TTFTUnknown += p.ttftUnknown
		out.TPOTUnknown += p.tpotUnknown
	}
	if out.TTFTPredictions == 0 && out.TPOTPredictions == 0 {
		return nil
	}
	for i, q := range []float64{0.5, 0.9} {
		out.TTFT[i] = quantileEstimate(ttft, q, rng)
		out.TPOT[i] = quantileEstimate(tpot, q, rng)
	}
	return out
}

// quantileEstimate is the q-quantile of the pooled values of every seed,
// with each seed's own and a two-level bootstrap interval (seeds drawn
// with replacement, then values within each drawn seed).
func quantileEstimate(seeds [][]float64, q float64, rng *rand.Rand) stats.Estimate {
	var pooled []float64
	var e stats.Estimate
	for _, s := range seeds {
		pooled = append(pooled, s...)
		if len(s) > 0 {
			e.Seeds = append(e.Seeds, latency.Quantile(slices.Sorted(slices.Values(s)), q))
		}
	}
	if len(pooled) == 0 {
		return e
	}
	slices.Sort(pooled)
	e.Value = latency.Quantile(pooled, q)
	reps := make([]float64, 0, predictionReps)
	var sample []float64
	for range predictionReps {
		sample = sample[:0]
		for range seeds {
			s := seeds[rng.IntN(len(seeds))]
			for range s {
				sample = append(sample, s[rng.IntN(len(s))])
			}
		}
		if len(sample) == 0 {
			continue
		}
		slices.Sort(sample)
		reps = append(reps, latency.Quantile(sample, q))
	}
	slices.Sort(reps)
	e.Lo, e.Hi = e.Value, e.Value
	if len(reps) > 0 {
		e.Lo, e.Hi = latency.Quantile(reps, 0.025), latency.Quantile(reps, 0.975)
	}
	return e
}

// writePredictionErrors writes the latency model's errors by
// configuration, when any run measured them.
func (r *Report) writePredictionErrors(w io.Writer) {
	header := false
	for _, m := range r.Summaries {
		p := m.PredictionErrors
		if p == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nThe latency model's prediction error, |predicted − measured| / measured in %, of each request's TTFT and TPOT as predicted on the figures its claim read (every strategy fits and feeds the model; only `predicted` places by it), `value [95 % interval]` over seeds and requests; unknown counts predictions made while the worker's model was mostly its prior:")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| strategy | replicas | QPS | TTFT error p50 | TTFT error p90 | TPOT error p50 | TPOT error p90 | predictions (unknown) |")
			fmt.Fprintln(w, "|---|---:|---:|---|---|---|---|---|")
			header = true
		}
		fmt.Fprintf(w, "| %s | %d | %g | %s | %s | %s | %s | %d (%d), %d (%d) |\n", m.Strategy, m.Replicas, m.QPS,
			pctCell(p.TTFT[0]), pctCell(p.TTFT[1]), pctCell(p.TPOT[0]), pctCell(p.TPOT[1]),
			p.TTFTPredictions, p.TTFTUnknown, p.TPOTPredictions, p.TPOTUnknown)
	}
}

func pctCell(e stats.Estimate) string {
	return fmt.Sprintf("%.1f [%.1f, %.1f]", 100*e.Value, 100*e.Lo, 100*e.Hi)
}
