package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// The aim sets, by workload: each preset judges one (Options.Aims).
const (
	// AimsConversation: the Azure conversation trace (no prefix reuse,
	// heterogeneous fleet), no caps configured.
	AimsConversation = "conversation"
	// AimsMooncake: the Mooncake conversation trace at its scaled KV.
	AimsMooncake = "mooncake"
	// AimsReuse: multi-turn chat whose working set the fleet's KV holds.
	AimsReuse = "reuse"
)

// The loads the aims are judged at, as shares of capacity.
const (
	aimLoad     = 0.8
	aimLoadHigh = 0.95
)

// Non-inferiority margins of "nothing lost without the SLO-sized caps":
// the uncapped default may lose at most a point of goodput and a tenth of
// p99 TTFT to the same strategy with the offline caps.
const (
	lostGoodMargin = 0.99
	lostTailMargin = 1.1
)

// The intervals the aims are judged by (Aim.Judges).
const (
	judgeOwn   = "the default's own figure: 95 % two-level bootstrap interval"
	judgeRatio = "ratio: 95 % interval of the seed-paired bootstrap replicates"
	judgePeers = "ratio to each peer emulation: 95 % seed-paired bootstrap interval; the worst verdict over the peers, its peer shown"
	judgeDiff  = "difference to each peer emulation, points: 95 % seed-paired bootstrap interval; the worst verdict over the peers"
	judgeSeeds = "per-seed ratio: min and max over the seeds (one counter a run, no bootstrap)"
)

// computeAims judges the default strategy (report.DefaultSetup, whatever
// config.Default().Strategy is) by the aims of set: each a target on a
// figure with an interval, its verdict met, missed or not settled from
// that interval (stats.AtLeast, stats.AtMost), or not judged when a setup
// it needs has no figures at its load. Peers are the emulations of other
// schedulers (scoring/emulate), every one of them, replicated or not.
func computeAims(rep *report.Report, set string) []report.Aim {
	j := judge{rep: rep, us: report.DefaultSetup}
	slo := report.DefaultSetup + " caps=" + fleet.CapsSLOSized
	p50 := func(s stats.Stats) stats.Estimate { return s.TTFT[0] }
	p90 := func(s stats.Stats) stats.Estimate { return s.TTFT[1] }
	p99 := func(s stats.Stats) stats.Estimate { return s.TTFT[2] }
	good := func(s stats.Stats) stats.Estimate { return s.Good }
	var aims []report.Aim
	switch set {
	case AimsConversation:
		aims = append(aims,
			j.own("goodput (both SLOs), default, no caps", aimLoad, good, 0.99, "%"),
			j.ratio("p99 TTFT, default / GIE queue+KV emulation", aimLoad, "router "+emulate.QueueKVMaxScore, p99, atMost(0.5), "ms"),
			j.peers("tokens/s p5, default / every peer", aimLoad, func(s stats.Stats) stats.Estimate { return s.TPS[0] }, atLeast(1), ""),
			j.peers("tokens/s p50, default / every peer", aimLoad, func(s stats.Stats) stats.Estimate { return s.TPS[1] }, atLeast(1), ""),
			j.peers("goodput, default / every peer", aimLoadHigh, good, atLeast(1.2), "%"),
			j.peerDiff("errors, default minus every peer, points", aimLoadHigh, func(s stats.Stats) stats.Estimate { return s.Errors }),
		)
	case AimsMooncake:
		aims = append(aims,
			j.ratio("p90 TTFT, default / Dynamo emulation", aimLoad, "router "+emulate.PrefixOverlapMinCost, p90, atMost(0.8), "ms"),
			j.ratio("p90 TTFT, default / GIE prefix emulation x3", aimLoad, "router "+emulate.PrefixQueueKVMaxScore+" x3", p90, atMost(0.6), "ms"),
		)
	case AimsReuse:
		aims = append(aims,
			j.hitCeiling("prefix hit rate, default / fleet-KV ceiling", aimLoad, 0.95),
			j.peers("p50 TTFT, default / every peer", aimLoad, p50, atMost(1), "ms"),
			j.peers("p90 TTFT, default / every peer", aimLoad, p90, atMost(1), "ms"),
		)
	default:
		return nil
	}
	// Nothing the router wins with the offline caps is lost without them.
	return append(aims,
		j.ratio("goodput, default / default caps=slo-sized", aimLoad, slo, good, atLeast(lostGoodMargin), "%"),
		j.ratio("p99 TTFT, default / default caps=slo-sized", aimLoad, slo, p99, atMost(lostTailMargin), "ms"),
	)
}

// target is an aim's bound and its side.
type target struct {
	bound float64
	upper bool // the figure must stay at most bound
}

func atMost(b float64) target  { return target{bound: b, upper: true} }
func atLeast(b float64) target { return target{bound: b} }

func (t target) String() string {
	if t.upper {
		return fmt.Sprintf("<= %g", t.bound)
	}
	return fmt.Sprintf(">= %g", t.bound)
}

// verdict judges e by its interval.
func (t target) verdict(e stats.Estimate) string {
	if t.upper {
		return stats.AtMost(e, t.bound)
	}
	return stats.AtLeast(e, t.bound)
}

// judge reads one report's pooled figures.
type judge struct {
	rep *report.Report
	us  string
}

// stats is setup's pooled figures at load, if it has any.
func (j judge) stats(setup string, load float64) (stats.Stats, bool) {
	for _, s := range j.rep.Stats {
		if s.Setup == setup && s.Load == load && len(s.Seeds) > 0 {
			return s, true
		}
	}
	return stats.Stats{}, false
}

// missing is the aim a setup without figures at load leaves unjudged.
func missing(name string, load float64, t, judges string, setups ...string) report.Aim {
	return report.Aim{
		Name: name, Load: load, Target: t, Verdict: report.NotJudged, Judges: judges,
		Detail: fmt.Sprintf("no figures at %.0f%% load for %s (not run, or every seed overloaded)", 100*load, strings.Join(setups, " or ")),
	}
}

// own judges a figure of the default alone.
func (j judge) own(name string, load float64, fig func(stats.Stats) stats.Estimate, bound float64, unit string) report.Aim {
	t := atLeast(bound)
	us, ok := j.stats(j.us, load)
	if !ok {
		return missing(name, load, t.String(), judgeOwn, j.us)
	}
	e := fig(us)
	return report.Aim{
		Name: name, Load: load, Ratio: e, Target: t.String(), Verdict: t.verdict(e), Judges: judgeOwn,
		Detail: fmt.Sprintf("%s %s", j.us, report.FmtEst(e, unit)),
	}
}

// ratio judges the default's figure over other's.
func (j judge) ratio(name string, load float64, other string, fig func(stats.Stats) stats.Estimate, t target, unit string) report.Aim {
	us, ok1 := j.stats(j.us, load)
	them, ok2 := j.stats(other, load)
	if !ok1 || !ok2 {
		return missing(name, load, t.String(), judgeRatio, j.us, other)
	}
	r := stats.Ratio(fig(us), fig(them))
	return report.Aim{
		Name: name, Load: load, Ratio: r, Target: t.String(), Verdict: t.verdict(r), Judges: judgeRatio,
		Detail: fmt.Sprintf("%s %s vs %s %s", j.us, report.FmtEst(fig(us), unit), other, report.FmtEst(fig(them), unit)),
	}
}

// peerNames are the peer emulations with figures at load, sorted.
func (j judge) peerNames(load float64) []string {
	var out []string
	for _, s := range j.rep.Stats {
		if s.Load == load && len(s.Seeds) > 0 && isPeer(s.Setup) && !slices.Contains(out, s.Setup) {
			out = append(out, s.Setup)
		}
	}
	slices.Sort(out)
	return out
}

// isPeer reports whether a setup's name is a router running an emulation
// of another scheduler ("router <emulation> ...").
func isPeer(setup string) bool {
	f := strings.Fields(setup)
	return len(f) >= 2 && f[0] == "router" && slices.Contains(emulate.Names(), f[1])
}

// worse orders verdicts from the best: met, not settled, missed.
func worse(a, b string) bool {
	rank := map[string]int{stats.Met: 0, stats.NotSettled: 1, stats.Missed: 2}
	return rank[a] > rank[b]
}

// peers judges the default's figure over every peer's: met when met
// against each, missed when missed against any, not settled otherwise;
// the figure shown is the one against the peer that decides it (the
// worst verdict, then the worst value).
func (j judge) peers(name string, load float64, fig func(stats.Stats) stats.Estimate, t target, unit string) report.Aim {
	return j.overPeers(name, load, t, judgePeers, fig, unit, stats.Ratio)
}

// peerDiff judges the default's figure minus every peer's, in points, at
// most 0: no more of it than any peer.
func (j judge) peerDiff(name string, load float64, fig func(stats.Stats) stats.Estimate) report.Aim {
	points := func(a, b stats.Estimate) stats.Estimate { return stats.Scale(stats.Diff(a, b), 100) }
	return j.overPeers(name, load, atMost(0), judgeDiff, fig, "%", points)
}

// overPeers judges cmp(the default's figure, a peer's) against every peer.
func (j judge) overPeers(name string, load float64, t target, judges string, fig func(stats.Stats) stats.Estimate, unit string,
	cmp func(us, them stats.Estimate) stats.Estimate,
) report.Aim {
	us, ok := j.stats(j.us, load)
	peers := j.peerNames(load)
	if !ok || len(peers) == 0 {
		return missing(name, load, t.String(), judges, j.us, "any peer emulation")
	}
	a := report.Aim{Name: name, Load: load, Target: t.String(), Judges: judges}
	var each []string
	for _, p := range peers {
		them, _ := j.stats(p, load)
		r := cmp(fig(us), fig(them))
		v := t.verdict(r)
		each = append(each, fmt.Sprintf("%s %s (%.3g, %s)", p, report.FmtEst(fig(them), unit), r.Value, v))
		decides := a.Verdict == "" || worse(v, a.Verdict) ||
			v == a.Verdict && (t.upper && r.Value > a.Ratio.Value || !t.upper && r.Value < a.Ratio.Value)
		if decides {
			a.Verdict, a.Ratio = v, r
			a.Detail = p
		}
	}
	a.Detail = fmt.Sprintf("%s %s; against %s; each peer: %s", j.us, report.FmtEst(fig(us), unit), a.Detail, strings.Join(each, "; "))
	return a
}

// hitCeiling judges the default's prefix hit rate over the fleet-KV
// ceiling, the higher of the greedy and pooled replays, seed by seed.
func (j judge) hitCeiling(name string, load float64, bound float64) report.Aim {
	t := atLeast(bound)
	us, ok := j.stats(j.us, load)
	if !ok || j.rep.Ceilings == nil {
		return missing(name, load, t.String(), judgeSeeds, j.us)
	}
	var ceil []float64
	for _, seed := range us.Seeds {
		ceil = append(ceil, max(j.rep.Ceilings.Fleet[seed], j.rep.Ceilings.Pooled[seed]))
	}
	r := stats.Estimate{}
	lo, hi := math.Inf(1), math.Inf(-1)
	n := 0
	for i, h := range us.HitRate.Seeds {
		// A seed with a ceiling of 0 has no ratio.
		if i < len(ceil) && ceil[i] > 0 {
			v := h / ceil[i]
			r.Seeds = append(r.Seeds, v)
			r.Value += v
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			n++
		}
	}
	if n == 0 {
		return missing(name, load, t.String(), judgeSeeds, j.us+" (no seed with a ceiling above 0)")
	}
	r.Value /= float64(n)
	r.Lo, r.Hi = lo, hi
	return report.Aim{
		Name: name, Load: load, Ratio: r, Target: t.String(), Verdict: t.verdict(r), Judges: judgeSeeds,
		Detail: fmt.Sprintf("%s %.1f%%; per seed: %s", j.us, 100*us.HitRate.Value, joinFloats(r.Seeds, "%.2f")),
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
		"Caps: every router setup runs with no max_concurrency unless its name says caps=: batch-limit is each engine's own batch limit (max_num_seqs), a number an operator reads from the engine's configuration; slo-sized (or xF, those times F) is the offline caps sized by replaying the trace on each GPU's profile (the Fleet section), which no operator can do for their own traffic. The peers' emulations run uncapped, as the schedulers they emulate, and scrape the workers' metrics every 50 ms of GPU time; the other strategies keep the router's default scrape period. Each replica of a multi-replica emulation keeps its own prefix index, as those schedulers' replicas do.",
		"Router setups queue up to 100,000 requests for up to 10 minutes: Envoy alone queues without limit at the GPUs, so a router that shed load would win on latency by refusing work.",
	}
	if o.TimeScale != 1 {
		notes = append(notes, fmt.Sprintf("The fleet ran at %.3g times the profiled GPUs' durations; router periods that bound how fresh its view of the GPUs is (refresh, scrape, staleness) were scaled alike.", o.TimeScale))
	}
	return notes
}
