package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
)

// A run keeps the errors of the predictions made for the worker that
// served each request, and a summary gives their quantiles over the
// seeds with an interval around them.
func TestPredictionErrors(t *testing.T) {
	var p predictionTally
	pred := &scheduler.Prediction{TTFTSeconds: 1, TPOTSeconds: 0.1, TPOTUnknown: true}
	for _, d := range []*scheduler.Decision{
		{Worker: "a", Prediction: pred, Result: &scheduler.Result{ServedBy: "a", TTFTSeconds: 1, TTFTError: 0.1, TPOTSeconds: 0.1, TPOTError: 0.2}},
		{Worker: "a", Prediction: pred, Result: &scheduler.Result{ServedBy: "b", TTFTSeconds: 1, TTFTError: 9}},   // moved: not its prediction
		{Worker: "a", Prediction: pred, Result: &scheduler.Result{ServedBy: "a", TTFTSeconds: 1, TTFTError: 0.3}}, // one token: no TPOT
		{Worker: "a", Prediction: pred}, // the claim's record
		{Worker: "a", Result: &scheduler.Result{ServedBy: "a", TTFTSeconds: 1, TTFTError: 7}}, // no prediction
	} {
		p.record(d)
	}
	if len(p.ttft) != 2 || len(p.tpot) != 1 || p.tpotUnknown != 1 || p.ttftUnknown != 0 {
		t.Fatalf("tally %+v, want TTFT errors 0.1 and 0.3, TPOT 0.2 (unknown)", p)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	seed := func(lo float64) []float64 { // 101 errors lo..lo+1
		out := make([]float64, 101)
		for i := range out {
			out[i] = lo + float64(i)/100
		}
		return out
	}
	e := quantileEstimate([][]float64{seed(0), seed(1)}, 0.5, rng)
	if math.Abs(e.Value-1) > 1e-9 || len(e.Seeds) != 2 || e.Seeds[0] != 0.5 || e.Seeds[1] != 1.5 {
		t.Fatalf("median %+v, want 1 pooled, 0.5 and 1.5 by seed", e)
	}
	// Seeds this far apart make the interval span most of both.
	if !(e.Lo < 0.8 && e.Hi > 1.2 && e.Lo <= e.Value && e.Value <= e.Hi) {
		t.Fatalf("interval [%v, %v] around %v", e.Lo, e.Hi, e.Value)
	}
	runs := []*RunResult{{Predictions: p}}
	s := summarizePredictions(runs, rng)
	if s == nil || s.TTFTPredictions != 2 || s.TPOTUnknown != 1 || math.Abs(s.TTFT[0].Value-0.2) > 1e-9 {
		t.Fatalf("summary %+v", s)
	}
	if summarizePredictions([]*RunResult{{}}, rng) != nil {
		t.Fatal("a run with no prediction summarised")
	}
}
