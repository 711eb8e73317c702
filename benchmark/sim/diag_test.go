package sim

import (
	"fmt"
	"testing"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/scoring/latency"
)

func TestDiag(t *testing.T) {
	s := DefaultStudy()
	s.QPS = []float64{8}
	src, _ := s.Workload.load()
	run := Run{GPUs: s.GPUs, Engine: s.Engine, Replicas: 1, Strategy: "predicted", QPS: 8, Seed: 1, Router: s.Router}
	reqs := src.requests(8, 1)
	diagHook = func(r *runner) {
		m := r.replicas[0].LatencyModel(r.gpus[0].id, loadgen.Model)
		fmt.Printf("TTFT coef %v slow %v samples %v unknown %v\nTPOT coef %v unknown %v\n", m.TTFT.Coef, m.TTFT.Slow, m.TTFT.Samples, m.TTFT.Unknown, m.TPOT.Coef, m.TPOT.Unknown)
		for _, u := range []int{1200, 7200} {
			for _, run := range []int{5, 20, 40} {
				f := latency.Features{Running: run, DecodeTokens: run * 1000, Uncached: u, Output: 1000}
				fmt.Printf("u=%d running=%d ttft %v tpot %v\n", u, run, m.PredictTTFT(f).Value, m.PredictTPOT(f).Value)
			}
		}
	}
	if _, err := simulate(run, reqs); err != nil {
		t.Fatal(err)
	}
}
