package scheduler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/cli"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/decisions"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// A new snapshot term is one declaration and one registration, as
// docs/extending.md describes; nothing else in the router changes. This one
// penalises the worker named "a".
func init() {
	scoring.RegisterTerm(scoring.SnapshotTerm{
		Name: "avoid_a", Key: "avoid_a", Default: 0,
		Doc: "1 for the worker named a, 0 for any other", Reads: "Worker.ID",
		Prepare: scoring.PerWorker(func(w *scoring.Worker) scoring.Signal {
			if w.ID == "a" {
				return scoring.Known(1)
			}
			return scoring.Known(0)
		}),
	})
}

// TestRegisteredTermReachesExplain follows a registered term from its
// weight in the configuration file through scored's plan and the claim to
// the decision explain serves: its weight and each worker's value are in
// the breakdown, and it decides between two otherwise equal workers.
func TestRegisteredTermReachesExplain(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse([]byte("scoring:\n  weights:\n    avoid_a: 50\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(nil, state.Limits{})
	specs := []state.WorkerSpec{
		{ID: "a", Address: "a:80", Models: []string{"m"}, MaxConcurrency: 4},
		{ID: "b", Address: "b:80", Models: []string{"m"}, MaxConcurrency: 4},
	}
	if err := store.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	ring := decisions.NewRing(8)
	p := scoring.Params{Weights: cfg.Scoring.Weights.Scoring(), JobCostScale: cfg.Scoring.JobCostScale.D()}
	s, err := scheduler.New(store, scheduler.Options{Strategy: scoring.Scored, Params: p, ReplicaID: "test", Recorder: ring})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	tk, err := s.Admit(ctx, scheduler.Request{ID: "r1", Model: "m", PromptTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Finish(scheduler.Outcome{Status: 200})

	d, err := decisions.NewExplainer(ring, nil).Explain(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// What GET /decisions/{id} serves: the decision as JSON.
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var served struct {
		Worker     string
		Candidates []struct {
			Worker string
			Terms  []struct {
				Name          string
				Weight, Value float64
				Unknown       bool
			}
		}
	}
	if err := json.Unmarshal(raw, &served); err != nil {
		t.Fatal(err)
	}
	if len(served.Candidates) != 2 {
		t.Fatalf("%d candidates in %s", len(served.Candidates), raw)
	}
	want := map[string]float64{"a": 1, "b": 0}
	for _, c := range served.Candidates {
		found := false
		for _, term := range c.Terms {
			if term.Name != "avoid_a" {
				continue
			}
			found = true
			if term.Weight != 50 || term.Value != want[c.Worker] || term.Unknown {
				t.Errorf("%s: avoid_a = %+v, want weight 50 value %v", c.Worker, term, want[c.Worker])
			}
		}
		if !found {
			t.Errorf("%s: the registered term is not in the breakdown: %s", c.Worker, raw)
		}
	}
	if served.Worker != "b" {
		t.Errorf("claimed %s: the term's weight should send the request to b", served.Worker)
	}
	// What `llm-router explain` prints: the term has its column.
	var out bytes.Buffer
	cli.PrintDecision(&out, d)
	if !strings.Contains(out.String(), "avoid_a") {
		t.Errorf("explain's table has no avoid_a column:\n%s", out.String())
	}
}
