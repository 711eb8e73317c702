package cli

import (
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
)

func TestPrintDecisionShowsThePrefillPick(t *testing.T) {
	d := &scheduler.Decision{
		RequestID: "r", Model: "m", Strategy: "scored", Outcome: scheduler.OutcomeClaimed, Worker: "d-0",
		Disaggregation: &scheduler.PrefillDecision{
			Disaggregated: true, UncachedTokens: 1024, MinUncachedTokens: 256, Worker: "p-1",
			Candidates: []scoring.Line{
				{Worker: "p-0", Active: 2, Cap: 4, Total: 0.2, Terms: []scoring.Term{{Name: "prefill_ahead", Weight: 1e-4, Value: 1000}}},
				{Worker: "p-1", Active: 0, Cap: 4, Total: 0.1, Terms: []scoring.Term{{Name: "prefill_uncached", Weight: 1e-4, Value: 1024}}},
			},
		},
	}
	var b strings.Builder
	PrintDecision(&b, d)
	out := strings.Join(strings.Fields(b.String()), " ") // the table's padding aside
	for _, want := range []string{"disaggregated: prefill on p-1 (1024 prompt tokens uncached on the decode worker, threshold 256)", "* p-1", "prefill_ahead=1000"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain lacks %q:\n%s", want, b.String())
		}
	}
	d.Disaggregation = &scheduler.PrefillDecision{Queued: true, MinUncachedTokens: 256}
	b.Reset()
	PrintDecision(&b, d)
	if !strings.Contains(b.String(), "waited in the queue") {
		t.Fatalf("queued request's placement not explained:\n%s", b.String())
	}
}
