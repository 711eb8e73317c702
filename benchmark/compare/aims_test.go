package compare

import (
	"testing"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// TestAimsVerdicts: each verdict comes from the interval of the figure the
// aim names, against the default strategy's setup (report.DefaultSetup,
// from config.Default): met, missed, not settled, and not judged when a
// setup it needs did not run. fakeReport scales every latency of a setup
// by its factor, and with it its decode rate (tokens/s) by the inverse.
func TestAimsVerdicts(t *testing.T) {
	gie := "router " + emulate.QueueKVMaxScore
	sglang := "router " + emulate.PrefixMatchOrShortestQueue
	slo := report.DefaultSetup + " caps=slo-sized"
	for _, c := range []struct {
		name    string
		factors map[string]float64
		prefix  bool
		aim     string
		want    string
	}{
		// p99 TTFT a quarter of the GIE emulation's: within 0.5.
		{"tail met", map[string]float64{report.DefaultSetup: 1, gie: 4}, false, "p99 TTFT, default / GIE", stats.Met},
		// Four fifths of it: the whole interval above 0.5.
		{"tail missed", map[string]float64{report.DefaultSetup: 1, gie: 1.25}, false, "p99 TTFT, default / GIE", stats.Missed},
		{"tail not judged", map[string]float64{report.DefaultSetup: 1}, false, "p99 TTFT, default / GIE", report.NotJudged},
		// Every request within both SLOs; at 40 times the latencies, the
		// last ninth of each run's TTFTs pass 2 s.
		{"goodput met", map[string]float64{report.DefaultSetup: 1}, false, "goodput (both SLOs)", stats.Met},
		{"goodput missed", map[string]float64{report.DefaultSetup: 40}, false, "goodput (both SLOs)", stats.Missed},
		// Twice the decode rate of one peer, half of another's: the worse
		// peer decides.
		{"tokens/s over every peer met", map[string]float64{report.DefaultSetup: 1, gie: 2, sglang: 3}, false, "tokens/s p50, default / every peer", stats.Met},
		{"tokens/s over every peer missed", map[string]float64{report.DefaultSetup: 1, gie: 2, sglang: 0.5}, false, "tokens/s p50, default / every peer", stats.Missed},
		// The same figures as a peer: the ratio's interval straddles 1.
		{"tokens/s level with a peer", map[string]float64{report.DefaultSetup: 1, gie: 1}, false, "tokens/s p50, default / every peer", stats.NotSettled},
		// No errors anywhere: no more than any peer's.
		{"errors", map[string]float64{report.DefaultSetup: 1, gie: 1}, false, "errors, default minus every peer", stats.Met},
		// Nothing lost without the caps: level within the margins, or not.
		{"nothing lost", map[string]float64{report.DefaultSetup: 1, slo: 1.5}, false, "p99 TTFT, default / default caps=slo-sized", stats.Met},
		{"tail lost", map[string]float64{report.DefaultSetup: 2, slo: 1}, false, "p99 TTFT, default / default caps=slo-sized", stats.Missed},
		// Reuse: the hit rate is 0.2 x the factor, the ceiling 0.25.
		{"hit rate missed", map[string]float64{report.DefaultSetup: 1}, true, "prefix hit rate", stats.Missed},
		{"hit rate met", map[string]float64{report.DefaultSetup: 1.2}, true, "prefix hit rate", stats.Met},
		{"p90 TTFT under every peer", map[string]float64{report.DefaultSetup: 1, sglang: 3, gie: 2}, true, "p90 TTFT, default / every peer", stats.Met},
	} {
		rep := fakeReport(c.factors, []float64{0.6, 0.8, 0.95}, c.prefix)
		a, ok := aimNamed(rep.Aims, c.aim)
		if !ok {
			t.Errorf("%s: no aim %q in %+v", c.name, c.aim, rep.Aims)
			continue
		}
		if a.Verdict != c.want || a.Judges == "" {
			t.Errorf("%s: %s %s, want %s (judged by %q; %s)", c.name, a.Name, a.Verdict, c.want, a.Judges, a.Detail)
		}
	}
}

// TestAimSets: each preset's aims, judged at their loads.
func TestAimSets(t *testing.T) {
	rep := fakeReport(map[string]float64{report.DefaultSetup: 1}, []float64{0.6, 0.8, 0.95}, true)
	for set, want := range map[string][]string{
		AimsConversation: {"goodput (both SLOs)", "p99 TTFT, default / GIE", "tokens/s p5", "tokens/s p50", "goodput, default / every peer", "errors", "goodput, default / default caps", "p99 TTFT, default / default caps"},
		AimsMooncake:     {"p90 TTFT, default / Dynamo", "p90 TTFT, default / GIE prefix emulation x3", "goodput, default / default caps", "p99 TTFT, default / default caps"},
		AimsReuse:        {"prefix hit rate", "p50 TTFT", "p90 TTFT", "goodput, default / default caps", "p99 TTFT, default / default caps"},
	} {
		aims := computeAims(rep, set)
		if len(aims) != len(want) {
			t.Errorf("%s: %d aims, want %d", set, len(aims), len(want))
		}
		for _, w := range want {
			a, ok := aimNamed(aims, w)
			if !ok || (a.Load != aimLoad && a.Load != aimLoadHigh) {
				t.Errorf("%s: aim %q %+v", set, w, a)
			}
		}
	}
	if a, _ := aimNamed(computeAims(rep, AimsConversation), "goodput, default / every peer"); a.Load != aimLoadHigh {
		t.Errorf("goodput over the peers is judged at 95%%: %+v", a)
	}
	if computeAims(rep, "") != nil {
		t.Error("aims without a set")
	}
	if !isPeer("router "+emulate.PrefixQueueKVMaxScore+" x3") || isPeer(report.DefaultSetup) || isPeer("envoy LEAST_REQUEST") || isPeer("router scored x3") {
		t.Error("isPeer")
	}
}
