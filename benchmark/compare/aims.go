package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// computeAims evaluates the aims of the scheduling issue at the load
// closest to want: on a trace with prefix reuse the cache-aware aims, on
// one without the tail and predictability aims; both the throughput and
// error aims.
func computeAims(rep *report.Report, want float64) []report.Aim {
	load, ok := report.ClosestLoad(rep.Loads, want)
	if !ok {
		return nil
	}
	at := map[string]stats.Stats{}
	for _, s := range rep.Stats {
		if s.Load == load && len(s.Seeds) > 0 {
			at[s.Setup] = s
		}
	}
	us, ok := at[report.DefaultSetup]
	if !ok {
		return nil
	}
	var aims []report.Aim
	ratio := func(name, other string, fig func(stats.Stats) stats.Estimate, target float64, unit string) {
		them, ok := at[other]
		if !ok {
			return
		}
		r := stats.Ratio(fig(us), fig(them))
		aims = append(aims, report.Aim{
			Name: name, Load: load, Ratio: r, Target: fmt.Sprintf("<= %.2g", target), Verdict: stats.AtMost(r, target),
			Detail: fmt.Sprintf("%s %s vs %s %s", report.DefaultSetup, report.FmtEst(fig(us), unit), other, report.FmtEst(fig(them), unit)),
		})
	}
	p90 := func(s stats.Stats) stats.Estimate { return s.TTFT[1] }
	p99 := func(s stats.Stats) stats.Estimate { return s.TTFT[2] }
	if rep.Ceilings != nil {
		ratio("p90 TTFT, default / GIE prefix emulation x3", "router "+emulate.PrefixQueueKVMaxScore+" x3", p90, 0.5, "ms")
		ratio("p90 TTFT, default / Envoy LEAST_REQUEST", "envoy LEAST_REQUEST", p90, 0.25, "ms")
		// Judged against the higher of the two fleet ceilings: the issue's
		// greedy replay, or the pooled cache that bounds every placement.
		var ceil []float64
		for _, seed := range us.Seeds {
			ceil = append(ceil, max(rep.Ceilings.Fleet[seed], rep.Ceilings.Pooled[seed]))
		}
		// Seeds with a ceiling of 0 have no ratio; with none left, no aim
		// (and no infinite bounds, which JSON cannot carry).
		if slices.ContainsFunc(ceil, func(c float64) bool { return c > 0 }) {
			r := stats.Estimate{}
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, h := range us.HitRate.Seeds {
				if ceil[i] > 0 {
					v := h / ceil[i]
					r.Seeds = append(r.Seeds, v)
					r.Value += v / float64(len(ceil))
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			r.Lo, r.Hi = lo, hi
			aims = append(aims, report.Aim{
				Name: "prefix hit rate, default / fleet-KV ceiling (the higher of greedy and pooled)", Load: load, Ratio: r, Target: ">= 0.9", Verdict: stats.AtLeast(r, 0.9),
				Detail: fmt.Sprintf("per seed: %s (interval: min and max over seeds)", joinFloats(r.Seeds, "%.2f")),
			})
		}
		if x3, ok := at[report.DefaultSetup+" x3"]; ok && len(us.HitRate.Seeds) > 0 && len(x3.HitRate.Seeds) > 0 {
			aims = append(aims, replicaHitAim(us, x3, load))
		}
	} else {
		ratio("p99 TTFT, default / Envoy LEAST_REQUEST", "envoy LEAST_REQUEST", p99, 0.7, "ms")
		ratio("p99 TTFT, default / GIE queue+KV emulation", "router "+emulate.QueueKVMaxScore, p99, 1, "ms")
		aims = append(aims, report.Aim{
			Name: "goodput (share within both SLOs), default", Load: load, Ratio: us.Good, Target: ">= 0.99", Verdict: stats.AtLeast(us.Good, 0.99),
			Detail: fmt.Sprintf("%s %s", report.DefaultSetup, report.FmtEst(us.Good, "")),
		})
		best, bestName := stats.Estimate{}, ""
		for name, s := range at {
			if !ownVariant(name) && s.TPSRatio.Value > best.Value {
				best, bestName = s.TPSRatio, name
			}
		}
		if bestName != "" {
			r := stats.Ratio(us.TPSRatio, best)
			aims = append(aims, report.Aim{
				Name: "tokens/s p5 / p50, default over the best peer", Load: load, Ratio: r, Target: "> 1", Verdict: stats.AtLeast(r, 1),
				Detail: fmt.Sprintf("%s %s vs %s %s", report.DefaultSetup, report.FmtEst(us.TPSRatio, ""), bestName, report.FmtEst(best, "")),
			})
		}
	}
	best, bestName := 0.0, ""
	minErr := math.Inf(1)
	for name, s := range at {
		if s.Throughput > best {
			best, bestName = s.Throughput, name
		}
		minErr = math.Min(minErr, s.Errors.Value)
	}
	if best > 0 {
		r := stats.Estimate{Value: us.Throughput / best, Lo: us.Throughput / best, Hi: us.Throughput / best}
		aims = append(aims, report.Aim{
			Name: "throughput, default / best configuration", Load: load, Ratio: r, Target: ">= 0.95", Verdict: stats.AtLeast(r, 0.95),
			Detail: fmt.Sprintf("%s %.2f req/s vs %s %.2f req/s (mean over seeds; no interval)", report.DefaultSetup, us.Throughput, bestName, best),
		})
	}
	verdict := stats.Met
	if us.Errors.Value > minErr {
		verdict = stats.Missed
	}
	aims = append(aims, report.Aim{
		Name: "errors, default vs the fewest of any configuration", Load: load, Ratio: us.Errors, Target: "no more than any peer", Verdict: verdict,
		Detail: fmt.Sprintf("%s %s; fewest %.2f%%", report.DefaultSetup, report.FmtEst(us.Errors, "%"), 100*minErr),
	})
	return aims
}

// ownVariant reports whether a setup is the default strategy itself or a
// variant of it (replicas, settings): not a peer.
func ownVariant(name string) bool {
	return name == report.DefaultSetup || strings.HasPrefix(name, report.DefaultSetup+" ")
}

// replicaHitAim: with three replicas the default's hit rate stays within
// 2 points of one replica's, since they share one index. The figure is
// one minus three replicas' hit rate, in points, per seed; its interval
// the min and max over seeds, like the other hit-rate aim.
func replicaHitAim(one, three stats.Stats, load float64) report.Aim {
	r := stats.Estimate{}
	lo, hi := math.Inf(1), math.Inf(-1)
	n := min(len(one.HitRate.Seeds), len(three.HitRate.Seeds))
	for i := range n {
		d := 100 * (one.HitRate.Seeds[i] - three.HitRate.Seeds[i])
		r.Seeds = append(r.Seeds, d)
		r.Value += d / float64(n)
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	r.Lo, r.Hi = lo, hi
	return report.Aim{
		Name: "prefix hit rate, default 1 replica minus 3 replicas (points)", Load: load, Ratio: r, Target: "<= 2", Verdict: stats.AtMost(r, 2),
		Detail: fmt.Sprintf("%s %.1f%% vs x3 %.1f%%; per seed: %s (interval: min and max over seeds)", report.DefaultSetup, 100*one.HitRate.Value, 100*three.HitRate.Value, joinFloats(r.Seeds, "%.1f")),
	}
}

func joinFloats(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

// compareNotes are the caveats every report carries.
func compareNotes(o Options, w *loadgen.Workload) []string {
	notes := []string{
		"max_tokens: " + w.MaxTokensWord() + "; gpusim generates the trace's true output length (gpusim_output_tokens) and ends it with finish_reason stop.",
		"Latencies are in GPU time: measured wall time divided by the time scale (gpusim's slowdown). The router's own overhead (about 1-3 ms of wall time a request on a 2-core host) is multiplied alike, a handicap that Envoy-only setups do not carry.",
		"Streams: gpusim sends each response's first token at once and the rest in one event at the end (--stream-summary), with the request's inter-token gaps from the engine's clock in the final usage event; TTFT and E2E are the client's own measurements. Per-token events through Envoy would cost two cores more than a 2-core host has at these rates.",
		"Every run starts with prompts under a fresh nonce, so no run is served by blocks an earlier run left in the GPUs' prefix caches; each run's warm-up requests warm them.",
		"The peers' emulations (queue_kv_max_score and the prefix-aware ones) run without caps, as the schedulers they emulate, and scrape the workers' metrics every 50 ms of GPU time; the other strategies keep the router's default scrape period. Each replica of a multi-replica emulation keeps its own prefix index, as those schedulers' replicas do.",
		"Router setups queue up to 100,000 requests for up to 10 minutes: Envoy alone queues without limit at the GPUs, so a router that shed load would win on latency by refusing work.",
	}
	if o.TimeScale != 1 {
		notes = append(notes, fmt.Sprintf("The fleet ran at %.3g times the profiled GPUs' durations; router periods that bound how fresh its view of the GPUs is (refresh, scrape, staleness) were scaled alike.", o.TimeScale))
	}
	return notes
}
