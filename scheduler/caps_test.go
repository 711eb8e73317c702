package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

// A learned limit below the configured cap is the cap the decision shows
// and the one the claim keeps; the decision names it.
func TestLearnedCapInDecision(t *testing.T) {
	ctx := context.Background()
	s, store, rec := newTestScheduler(t, "least_loaded", spec("a", "m", 4), spec("b", "m", 4))
	if err := store.PutLimits(ctx, map[string]state.Limit{"a": {Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	tickets, onA := admitCounting(t, s, Request{Model: "m"}, 5, "a")
	if onA != 1 {
		t.Fatalf("%d requests on a, whose learned limit is 1", onA)
	}
	if _, err := s.Admit(ctx, Request{ID: "r6", Model: "m"}); !errors.Is(err, ErrAtCapacity) {
		t.Fatalf("sixth request: %v, want at capacity (1 + 4)", err)
	}
	d := rec.ds[0]
	if d.LearnedCaps["a"] != 1 || len(d.LearnedCaps) != 1 {
		t.Fatalf("decision's learned caps %v, want a: 1", d.LearnedCaps)
	}
	for _, l := range d.Candidates {
		if want := map[string]int{"a": 1, "b": 4}[l.Worker]; l.Cap != want {
			t.Fatalf("line %s shows cap %d, want %d", l.Worker, l.Cap, want)
		}
	}
	for _, tk := range tickets {
		tk.Finish(Outcome{Status: 200})
	}
}

// A learned token limit leaves out a worker whose claims' tokens and the
// request's would pass it; the decision names it.
func TestLearnedTokenCapInDecision(t *testing.T) {
	ctx := context.Background()
	s, store, rec := newTestScheduler(t, "scored", spec("a", "m", 4), spec("b", "m", 4))
	if err := store.PutLimits(ctx, map[string]state.Limit{"a": {Value: 4, Tokens: 1000}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	tickets, onA := admitCounting(t, s, Request{Model: "m", PromptTokens: 100, MaxTokens: 500}, 5, "a")
	if onA != 1 {
		t.Fatalf("%d requests of 600 tokens on a, whose learned token limit is 1000", onA)
	}
	if _, err := s.Admit(ctx, Request{ID: "r6", Model: "m", PromptTokens: 100, MaxTokens: 500}); !errors.Is(err, ErrAtCapacity) {
		t.Fatalf("sixth request: %v, want at capacity (1 + 4)", err)
	}
	if d := rec.ds[0]; d.LearnedTokenCaps["a"] != 1000 || len(d.LearnedTokenCaps) != 1 || len(d.LearnedCaps) != 0 {
		t.Fatalf("decision's learned caps %v and token caps %v, want a: 1000 tokens only", d.LearnedCaps, d.LearnedTokenCaps)
	}
	for _, tk := range tickets {
		tk.Finish(Outcome{Status: 200})
	}
}

// admitCounting admits n copies of r (ids r0..) and counts those placed on
// worker.
func admitCounting(t *testing.T, s *Scheduler, r Request, n int, worker string) (tickets []*Ticket, on int) {
	t.Helper()
	for i := range n {
		r.ID = fmt.Sprint("r", i)
		tk, err := s.Admit(context.Background(), r)
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
		tickets = append(tickets, tk)
		if tk.Worker() == worker {
			on++
		}
	}
	return tickets, on
}

func TestEngineFiguresOverEstimates(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	def := fleetDefaults{kvBlocks: 4096}
	w := state.Worker{Spec: state.WorkerSpec{KVBlocks: 2048}}
	if got := kvBlocks(w, def); got != 2048 {
		t.Fatalf("kv blocks %d, want the spec's 2048", got)
	}
	w.Telemetry.KVBlocks = state.Sample{Value: 54000, At: at}
	if got := kvBlocks(w, def); got != 54000 {
		t.Fatalf("kv blocks %d, want the engine's 54000", got)
	}
	if got := kvBlocks(state.Worker{}, def); got != 4096 {
		t.Fatalf("kv blocks %d, want the default", got)
	}
	for _, tc := range []struct {
		ratio state.Sample
		want  float64
	}{{state.Sample{}, 0}, {state.Sample{Value: 0.3, At: at}, 0.3}, {state.Sample{Value: 1.7, At: at}, 1}, {state.Sample{Value: 0, At: at}, 0.05}} {
		w.Telemetry.HitRatio = tc.ratio
		if got := prefixTrust(w); got != tc.want {
			t.Fatalf("trust for ratio %+v: %v, want %v", tc.ratio, got, tc.want)
		}
	}
}
