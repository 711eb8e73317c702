package scheduler

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// With a seeded Shuffle, the same requests on the same idle fleet get the
// same workers: ties between idle workers are the shuffle's to break.
func TestShuffleMakesTiesReproducible(t *testing.T) {
	picks := func(seed uint64) []string {
		store := memory.New(nil, state.Limits{})
		var specs []state.WorkerSpec
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			specs = append(specs, spec(id, "m", 1000))
		}
		if err := store.Register(context.Background(), specs); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		s, err := New(store, Options{Strategy: "least_loaded", Shuffle: rng.Shuffle})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for range 3 {
			// Refreshed between rounds only: within a round every worker
			// looks idle, so each pick is a tie the shuffle breaks.
			if err := s.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			for range 8 {
				tk, err := s.Admit(context.Background(), Request{Model: "m", PromptTokens: 10, MaxTokens: 10})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, tk.Worker())
				tk.Finish(Outcome{})
			}
		}
		return out
	}
	a, b := picks(7), picks(7)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different picks:\n%v\n%v", a, b)
	}
	if c := picks(8); slices.Equal(a, c) {
		t.Fatalf("seeds 7 and 8 picked alike (%v): the shuffle is not used", a)
	}
}
