package scheduler

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
)

// A long stream's TPOT is learned from its first TPOTTokens gaps, once,
// when it has them, and its end adds no second observation; the error
// the end measures is still that of the whole stream. A stream that ends
// before learns at its end, as before.
func TestTicketLearnsTPOTFromTheStreamsStart(t *testing.T) {
	s, store, c, rec := newPredictedScheduler(t, false, spec("a", "m", 8))
	ctx := context.Background()
	tk, err := s.Admit(ctx, Request{ID: "long", Model: "m", PromptTokens: 1000, MaxTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	tk.Decoded(TPOTTokens+1, time.Second) // before the first token: nothing
	c.add(200 * time.Millisecond)
	tk.FirstToken(200 * time.Millisecond)
	tk.Decoded(TPOTTokens, time.Second) // too few tokens: nothing
	c.add(640 * time.Millisecond)
	tk.Decoded(TPOTTokens+1, 640*time.Millisecond) // 20 ms a token
	tk.Decoded(TPOTTokens+5, 800*time.Millisecond) // only the first counts
	c.add(10 * time.Second)
	tk.Finish(Outcome{Status: 200, CompletionTokens: 500})
	s.bg.Wait()

	cfg := latency.DefaultConfig()
	m, f := tk.learn.model, tk.learn.features
	want := cfg.Add(
		cfg.Contribution(m, latency.Observation{At: at.Add(200 * time.Millisecond), Features: f, TTFT: 200 * time.Millisecond}),
		cfg.Contribution(m, latency.Observation{At: at.Add(840 * time.Millisecond), Features: f, TPOT: 20 * time.Millisecond}))
	snap, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end := at.Add(20 * time.Second)
	g, w := cfg.Rebase(snap.Workers[0].LatencyStats["m"], end), cfg.Rebase(want, end)
	if len(g.Sums) != latency.Size {
		t.Fatalf("stored %d sums, want %d", len(g.Sums), latency.Size)
	}
	for k := range w.Sums {
		if math.Abs(g.Sums[k]-w.Sums[k]) > 1e-9*math.Max(1, math.Abs(w.Sums[k])) {
			t.Fatalf("sum %d = %v, want %v: one TTFT and one TPOT of 20 ms", k, g.Sums[k], w.Sums[k])
		}
	}
	// The whole stream: (10.84 s − 0.2 s)/499.
	whole := (10840*time.Millisecond - 200*time.Millisecond) / 499
	if res := lastResult(t, rec, "long"); math.Abs(res.TPOTSeconds-whole.Seconds()) > 1e-9 || res.TPOTError <= 0 {
		t.Fatalf("result %+v, want the whole stream's TPOT %v", res, whole)
	}
	if _, tpot := s.PredictionErrors(); tpot.Count != 1 {
		t.Fatalf("TPOT errors recorded %d, want 1", tpot.Count)
	}

	// A short stream learns at its end.
	short, err := s.Admit(ctx, Request{ID: "short", Model: "m", PromptTokens: 100, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	before := snap.Workers[0].LatencyStats["m"]
	c.add(100 * time.Millisecond)
	short.FirstToken(100 * time.Millisecond)
	c.add(900 * time.Millisecond)
	short.Finish(Outcome{Status: 200, CompletionTokens: 10})
	s.bg.Wait()
	snap, err = store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := snap.Workers[0].LatencyStats["m"]
	// The short stream's one TPOT observation.
	n := func(st latency.Stats) float64 { return latency.Fit(cfg, st, latency.DefaultPrior(), end).TPOT.Samples }
	if n(after) <= n(before) {
		t.Fatal("a short stream's end taught no TPOT")
	}
}
