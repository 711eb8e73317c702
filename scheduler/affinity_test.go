package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// TestAdmitFollowsThePrefix: with a prefix weight, a second request
// sharing the first one's prompt goes where the first went, although
// that worker is busier, and the decision shows why.
func TestAdmitFollowsThePrefix(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(ctx, []state.WorkerSpec{spec("a", "m", 8), spec("b", "m", 8)}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s, err := New(store, Options{
		Strategy:  scoring.Scored,
		Params:    scoring.Params{Weights: scoring.Weights{Active: 10, Prefix: 100, TokenLoad: 1}, JobCostScale: 10 * time.Second},
		ReplicaID: "test", Recorder: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	blocks := []uint64{1, 2, 3, 4}
	first, err := s.Admit(ctx, Request{ID: "r1", Model: "m", PromptTokens: 64, MaxTokens: 10, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Admit(ctx, Request{ID: "r2", Model: "m", PromptTokens: 80, MaxTokens: 10, Blocks: append(blocks, 5)})
	if err != nil {
		t.Fatal(err)
	}
	if second.Worker() != first.Worker() {
		t.Fatalf("the second request went to %s, the prefix is on %s", second.Worker(), first.Worker())
	}
	d := rec.ds[len(rec.ds)-1]
	found := false
	for _, c := range d.Candidates {
		if c.Worker != first.Worker() {
			continue
		}
		for _, term := range c.Terms {
			if term.Name == "prefix_match" && term.Value == 0.8 {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no prefix_match of 0.8 for %s in %+v", first.Worker(), d.Candidates)
	}
	first.Finish(Outcome{Status: 200})
	second.Finish(Outcome{Status: 200})
	snap, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.PrefillTokens != 0 || w.DecodeTokens != 0 {
			t.Fatalf("tokens left on %s: %d prefill, %d decode", w.Spec.ID, w.PrefillTokens, w.DecodeTokens)
		}
	}
}
