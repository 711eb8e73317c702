package benchmark

import (
	"fmt"
	"math"

	"github.com/llm-router/llm-router/scoring"
)

// Aim is one of the benchmark's targets, computed from runs of the same
// comparison: a ratio and whether it is met.
type Aim struct {
	Name   string  `json:"name"`
	Load   float64 `json:"load"`
	Ratio  float64 `json:"ratio"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
	// Detail gives the two values compared.
	Detail string `json:"detail"`
}

// The aims' targets, from the benchmark issue: at 80 % load the router's
// default strategy (scored) should have at most half the p99 TTFT of
// Envoy's least-request balancing and at most 0.7 times that of the
// Gateway API Inference Extension's default scheduler (emulated), at most
// half the per-request tokens/s spread (CV) of round robin, and at least
// 0.95 of the best configuration's throughput.
const (
	aimVsLeastRequest  = 0.5
	aimVsGIE           = 0.7
	aimCVVsRoundRobin  = 0.5
	aimThroughputShare = 0.95
	aimSetup           = "router " + scoring.Scored
)

// computeAims evaluates the latency aims at the load closest to want and
// the throughput aim at the highest load, where configurations can differ
// in what they complete (below capacity every one completes what it is
// offered).
func computeAims(runs []*Run, want float64) []Aim {
	if len(runs) == 0 {
		return nil
	}
	at := summariesAt(runs, runsAt(runs, want)[0].Summary.Load)
	us, ok := at[aimSetup]
	if !ok {
		return nil
	}
	load := us.Load
	var aims []Aim
	lower := func(name, other string, metric func(Summary) float64, format string, target float64) {
		them, ok := at[other]
		if !ok || metric(them) == 0 {
			return
		}
		ratio := metric(us) / metric(them)
		aims = append(aims, Aim{
			Name: name, Load: load, Ratio: ratio, Target: fmt.Sprintf("<= %.2g", target), Met: ratio <= target,
			Detail: fmt.Sprintf("%s "+format+" vs %s "+format, aimSetup, metric(us), other, metric(them)),
		})
	}
	p99 := func(s Summary) float64 { return s.TTFTP99 }
	cv := func(s Summary) float64 { return s.TPSCV }
	lower("p99 TTFT, scored / Envoy LEAST_REQUEST", "envoy LEAST_REQUEST", p99, "%.0f ms", aimVsLeastRequest)
	lower("p99 TTFT, scored / queue_kv_max_score", "router "+scoring.QueueKVMaxScore, p99, "%.0f ms", aimVsGIE)
	// "Round robin" is both Envoy's and the router's: both are reported.
	lower("tokens/s CV, scored / router round_robin", "router "+scoring.RoundRobin, cv, "%.3f", aimCVVsRoundRobin)
	lower("tokens/s CV, scored / Envoy ROUND_ROBIN", "envoy ROUND_ROBIN", cv, "%.3f", aimCVVsRoundRobin)

	top := 0.0
	for _, r := range runs {
		top = math.Max(top, r.Summary.Load)
	}
	at = summariesAt(runs, top)
	us = at[aimSetup]
	best, bestName := 0.0, ""
	for name, s := range at {
		if s.Throughput > best {
			best, bestName = s.Throughput, name
		}
	}
	if best > 0 {
		ratio := us.Throughput / best
		aims = append(aims, Aim{
			Name: "throughput, scored / best configuration", Load: top, Ratio: ratio,
			Target: fmt.Sprintf(">= %.2f", aimThroughputShare), Met: ratio >= aimThroughputShare,
			Detail: fmt.Sprintf("%s %.2f req/s vs %s %.2f req/s", aimSetup, us.Throughput, bestName, best),
		})
	}
	return aims
}

func summariesAt(runs []*Run, load float64) map[string]Summary {
	at := map[string]Summary{}
	for _, r := range runs {
		if r.Summary.Load == load {
			at[r.Summary.Setup] = r.Summary
		}
	}
	return at
}

// compareNotes are the caveats every report carries.
func compareNotes(o CompareOptions) []string {
	notes := []string{
		"Every request sets max_tokens to the trace's output length and gpusim generates exactly that many tokens, so strategies that read max_tokens (scored's job cost, inference_aware) know each job's true length; real clients send an upper bound.",
		"Latencies are in GPU time: measured wall time divided by the time scale (gpusim's slowdown).",
		"The emulations of other schedulers (queue_kv_max_score, prefix_queue_kv_max_score, prefix_match_or_shortest_queue, prefix_overlap_min_cost) run without caps, as the schedulers they emulate; the two emulating the Gateway API Inference Extension scrape the workers' metrics every 50 ms of GPU time (telemetry.scrape_interval), as it does; the other strategies keep the router's default scrape period.",
		"Router setups queue up to 100,000 requests for up to 10 minutes: Envoy alone queues without limit at the GPUs, so a router that shed load would win on latency by refusing work.",
	}
	if o.TimeScale != 1 {
		notes = append(notes, fmt.Sprintf("The fleet ran %.3g times slower than the profiled GPUs; router periods that bound how fresh its view of the GPUs is (refresh, scrape, staleness) were scaled alike.", o.TimeScale))
	}
	return notes
}
