package sim

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// judgeHitRatio names the interval of an aim on a ratio of hit rates.
const judgeHitRatio = "ratio of the means over seeds: 95 % interval of the seed-paired bootstrap over seeds"

// judgePoints names the interval of an aim on a difference in points.
const judgePoints = "difference in points: 95 % interval of the seed-paired bootstrap over seeds"

// The aims' operating points.
const (
	// aimReplicas is the replica count of the shared-prefix latency aims.
	aimReplicas = 4
	// aimRoundRobinP90 chooses the aims' rate: the lowest at which round
	// robin's TTFT p90 passes it (llm-d's operating point for its 150x5
	// aim; on a trace of long prompts the TTFT objective of 2 s is
	// passed by prefill alone, at any load).
	aimRoundRobinP90 = 10 * time.Second
	// aimManyReplicas is the replica count whose hit rate is held to one
	// replica's.
	aimManyReplicas = 8
)

// Peers are the emulations of other schedulers a study may run: the
// aims' "peer emulations".
func Peers() []string {
	return append(emulate.Names(), emulate.PrecisePrefixQueueKVMaxScore, emulate.LeastRequestP2C)
}

// judgeAims judges the default strategy's aims that the study can: on a
// shared-prefix workload, its latency and hit rate against round robin
// and llm-d's emulations, and its hit rate with many replicas against
// one; on a trace, its latency against the best peer emulation.
func judgeAims(s Study, sums []Summary) []report.Aim {
	def := config.Default().Strategy
	if !slices.Contains(s.Strategies, def) {
		return nil
	}
	var out []report.Aim
	if s.Workload.Kind == KindSharedPrefix {
		out = append(out, operatingPointAims(s, sums, def)...)
		out = append(out, replicaHitAims(s, sums, def)...)
	} else {
		out = append(out, bestPeerAims(s, sums, def)...)
	}
	return out
}

// find is the summary of strategy at replicas and rate, nil when the
// study has none.
func find(sums []Summary, strategy string, replicas int, rate float64) *Summary {
	for i := range sums {
		if m := &sums[i]; m.Strategy == strategy && m.Replicas == replicas && m.QPS == rate {
			return m
		}
	}
	return nil
}

// firstPast is the lowest rate at which strategy's TTFT p90 (point
// estimate) with replicas is above bound, and that p90 in ms.
func firstPast(s Study, sums []Summary, strategy string, replicas int, bound time.Duration) (float64, float64, bool) {
	rates := slices.Clone(s.Rates())
	slices.Sort(rates)
	for _, r := range rates {
		if m := find(sums, strategy, replicas, r); m != nil && m.TTFT[1].Value > stats.Ms(bound) {
			return r, m.TTFT[1].Value, true
		}
	}
	return 0, 0, false
}

// pairedRatioAim judges a/b ≤ or ≥ target; at says where.
func pairedRatioAim(name, at string, a, b stats.Estimate, target float64, atMost bool) report.Aim {
	r := stats.Ratio(a, b)
	aim := report.Aim{Name: name, Ratio: r, Target: fmt.Sprintf(">= %g", target), Verdict: stats.AtLeast(r, target), Judges: judgeRatio, Detail: at}
	if atMost {
		aim.Target, aim.Verdict = fmt.Sprintf("<= %g", target), stats.AtMost(r, target)
	}
	return aim
}

// notJudged is an aim the study cannot judge, and why.
func notJudged(name, at, why string) report.Aim {
	return report.Aim{Name: name, Verdict: report.NotJudged, Judges: judgeRatio, Detail: at + ": " + why}
}

// operatingPointAims: with 4 replicas, at the lowest rate where round
// robin's TTFT p90 passes 10 s, the default's TTFT p90 ≤ 0.1 × round
// robin's and ≤ 0.5 × llm-d's current default's, and its hit rate ≥ 0.95
// × the precise emulation's.
func operatingPointAims(s Study, sums []Summary, def string) []report.Aim {
	if !slices.Contains(s.Replicas, aimReplicas) || !slices.Contains(s.Strategies, "round_robin") {
		return nil
	}
	type spec struct {
		name, peer string
		target     float64
		hit        bool
	}
	specs := []spec{
		{fmt.Sprintf("TTFT p90, %s / round_robin", def), "round_robin", 0.1, false},
		{fmt.Sprintf("TTFT p90, %s / llm-d's current default (%s)", def, emulate.PrefixAffinityTokenLoad), emulate.PrefixAffinityTokenLoad, 0.5, false},
		{fmt.Sprintf("prefix hit rate, %s / llm-d's precise emulation (%s)", def, emulate.PrecisePrefixQueueKVMaxScore), emulate.PrecisePrefixQueueKVMaxScore, 0.95, true},
	}
	rate, p90, ok := firstPast(s, sums, "round_robin", aimReplicas, aimRoundRobinP90)
	at := fmt.Sprintf("%d replicas, %g req/s: the lowest rate at which round_robin's TTFT p90 passes %v (%.1f s)", aimReplicas, rate, aimRoundRobinP90, p90/1000)
	var out []report.Aim
	for _, sp := range specs {
		if !slices.Contains(s.Strategies, sp.peer) {
			continue
		}
		d, p := find(sums, def, aimReplicas, rate), find(sums, sp.peer, aimReplicas, rate)
		switch {
		case !ok:
			out = append(out, notJudged(sp.name, fmt.Sprintf("%d replicas", aimReplicas),
				fmt.Sprintf("round_robin's TTFT p90 stays under %v at every rate of the study", aimRoundRobinP90)))
		case d == nil || p == nil:
			out = append(out, notJudged(sp.name, at, "a configuration it needs has no figures"))
		case sp.hit:
			a := pairedRatioAim(sp.name, at, d.Hit, p.Hit, sp.target, false)
			a.Judges = judgeHitRatio
			out = append(out, a)
		default:
			out = append(out, pairedRatioAim(sp.name, at, d.TTFT[1], p.TTFT[1], sp.target, true))
		}
	}
	return out
}

// replicaHitAims: at every rate, the default's hit rate with 8 replicas
// minus one replica's, paired by seed, loses at most 1 point.
func replicaHitAims(s Study, sums []Summary, def string) []report.Aim {
	if !slices.Contains(s.Replicas, 1) || !slices.Contains(s.Replicas, aimManyReplicas) {
		return nil
	}
	var out []report.Aim
	for _, rate := range s.Rates() {
		one, many := find(sums, def, 1, rate), find(sums, def, aimManyReplicas, rate)
		if one == nil || many == nil {
			continue
		}
		d := stats.Scale(stats.Diff(many.Hit, one.Hit), 100)
		out = append(out, report.Aim{
			Name:  fmt.Sprintf("prefix hit rate, %s with %d replicas − 1 replica, points", def, aimManyReplicas),
			Ratio: d, Target: ">= -1", Verdict: stats.AtLeast(d, -1), Judges: judgePoints,
			Detail: fmt.Sprintf("%g req/s, %d seeds paired", rate, len(one.Seeds)),
		})
	}
	return out
}

// bestPeerAims: at the lowest rate where round robin's TTFT p90 passes
// 10 s, with each replica count, the default's TTFT
// p90 ≤ 0.8 × the best peer emulation's (the lowest p90 there).
func bestPeerAims(s Study, sums []Summary, def string) []report.Aim {
	var out []report.Aim
	for _, n := range s.Replicas {
		name := fmt.Sprintf("TTFT p90, %s / the best peer emulation", def)
		rate, p90, ok := firstPast(s, sums, "round_robin", n, aimRoundRobinP90)
		if !ok {
			out = append(out, notJudged(name, fmt.Sprintf("%d replicas", n),
				fmt.Sprintf("round_robin is not in the study or its TTFT p90 stays under %v at every rate", aimRoundRobinP90)))
			continue
		}
		d := find(sums, def, n, rate)
		var best *Summary
		for _, p := range Peers() {
			if m := find(sums, p, n, rate); m != nil && (best == nil || m.TTFT[1].Value < best.TTFT[1].Value) {
				best = m
			}
		}
		at := fmt.Sprintf("%d replicas, %g req/s: the lowest rate at which round_robin's TTFT p90 passes %v (%.1f s)", n, rate, aimRoundRobinP90, p90/1000)
		if d == nil || best == nil {
			out = append(out, notJudged(name, at, "no peer emulation in the study"))
			continue
		}
		a := pairedRatioAim(name, at, d.TTFT[1], best.TTFT[1], 0.8, true)
		a.Name = fmt.Sprintf("TTFT p90, %s / the best peer emulation (%s)", def, best.Strategy)
		out = append(out, a)
	}
	return out
}

// writeAims writes the aims as a Markdown table, when any.
func writeAims(w io.Writer, aims []report.Aim) {
	if len(aims) == 0 {
		return
	}
	fmt.Fprintln(w, "\nAims of the router's default strategy, judged by interval: met when the whole 95 % interval is on the target's side, missed when all of it is on the other, not settled otherwise:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| aim | value [interval] | target | verdict | judged by | detail |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, a := range aims {
		v := fmt.Sprintf("%.3f [%.3f, %.3f]", a.Ratio.Value, a.Ratio.Lo, a.Ratio.Hi)
		if a.Judges == judgeCount {
			v = fmt.Sprintf("%.0f", a.Ratio.Value)
		}
		if a.Verdict == report.NotJudged {
			v = "–"
		}
		fmt.Fprintf(w, "| %s | %s | %s | **%s** | %s | %s |\n", a.Name, v, a.Target, a.Verdict, a.Judges, a.Detail)
	}
}
