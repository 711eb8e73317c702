package scheduler

import (
	"context"
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// TestDisaggregatedAdapterPrefillsWhereTheAdapterIsServed: a request
// naming a LoRA adapter is prefilled only on a prefill worker that serves
// the adapter, and with no such worker it runs aggregated.
func TestDisaggregatedAdapterPrefillsWhereTheAdapterIsServed(t *testing.T) {
	ctx := context.Background()
	withRole := func(s state.WorkerSpec, r state.Role) state.WorkerSpec {
		s.Role = r
		return s
	}
	s, _, _ := newTestScheduler(t, scoring.Predicted,
		withRole(loraSpec("d0", 2, "sql", "chat"), state.RoleDecode),
		withRole(loraSpec("p0", 2, "chat"), state.RolePrefill),
		withRole(loraSpec("p1", 2, "sql"), state.RolePrefill))
	s.opts.Disaggregation.MinUncached = 256
	for i, want := range map[string]string{"sql": "p1", "chat": "p0"} {
		tk, err := s.Admit(ctx, Request{ID: "r-" + i, Model: i, PromptTokens: 2048, MaxTokens: 10, Blocks: blocks(uint64(len(i))*1000, 128)})
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := tk.Prefill(); !ok || p != want || tk.Worker() != "d0" {
			t.Fatalf("%s: decode %s, prefill %q %v; want d0 with %s", i, tk.Worker(), p, ok, want)
		}
		if d := tk.Decision.Disaggregation; d == nil || len(d.Candidates) != 1 || d.Candidates[0].Worker != want {
			t.Fatalf("%s: prefill candidates %+v, want only %s", i, d, want)
		}
		tk.Finish(Outcome{})
	}

	s2, _, _ := newTestScheduler(t, scoring.Predicted,
		withRole(loraSpec("d0", 2, "sql"), state.RoleDecode),
		withRole(loraSpec("p0", 2, "chat"), state.RolePrefill))
	s2.opts.Disaggregation.MinUncached = 256
	tk, err := s2.Admit(ctx, Request{ID: "r", Model: "sql", PromptTokens: 2048, MaxTokens: 10, Blocks: blocks(1, 128)})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := tk.Prefill(); ok {
		t.Fatalf("no prefill worker serves sql, yet prefilled on %s", p)
	}
	tk.Finish(Outcome{})
}
