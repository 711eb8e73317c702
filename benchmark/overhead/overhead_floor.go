package overhead

import (
	"fmt"
	"io"
	"slices"

	"github.com/llm-router/llm-router/benchmark/stats"
)

// FloorPoint is one configuration with an ext_proc server at one rate and
// body size, over the rounds: what it adds to Envoy alone (measured in the
// same round), its ext_proc server's CPU per request, and, for the router,
// its added latency as a multiple of the no-op ext_proc's (the floor) in
// the same round.
type FloorPoint struct {
	RatePoint
	Config    string       `json:"config"`
	AddedP50  stats.Spread `json:"added_p50_ms"`
	AddedP99  stats.Spread `json:"added_p99_ms"`
	CPUMicros stats.Spread `json:"extproc_cpu_us_per_request"`
	// P50Ratio and P99Ratio are the round-by-round added latency over the
	// no-op's, for the rounds where the no-op added more than nothing;
	// empty for the no-op itself.
	P50Ratio stats.Spread `json:"p50_ratio_to_noop"`
	P99Ratio stats.Spread `json:"p99_ratio_to_noop"`
}

// floorPoints summarises one point's rounds: rounds[r][i] is target i's
// step in round r; target 0 is Envoy alone.
func floorPoints(p RatePoint, targets []overheadTarget, rounds [][]OpenStep) []FloorPoint {
	noop := slices.IndexFunc(targets, func(t overheadTarget) bool { return t.name == configNoop })
	var out []FloorPoint
	for i := 1; i < len(targets); i++ {
		var p50, p99, cpu, r50, r99 []float64
		for _, steps := range rounds {
			base, s := steps[0], steps[i]
			a50, a99 := s.P50-base.P50, s.P99-base.P99
			p50, p99 = append(p50, a50), append(p99, a99)
			if c, ok := cpuOf(s, targets[i].extproc); ok && s.Sent > 0 {
				cpu = append(cpu, c*1e6/float64(s.Sent))
			}
			// A round whose floor added nothing measurable (noise in Envoy
			// alone's figure was larger) says nothing about the ratio.
			if noop >= 0 && i != noop {
				n := steps[noop]
				if d := n.P50 - base.P50; d > 0 {
					r50 = append(r50, a50/d)
				}
				if d := n.P99 - base.P99; d > 0 {
					r99 = append(r99, a99/d)
				}
			}
		}
		out = append(out, FloorPoint{
			RatePoint: p, Config: targets[i].name,
			AddedP50: stats.SpreadOf(p50), AddedP99: stats.SpreadOf(p99), CPUMicros: stats.SpreadOf(cpu),
			P50Ratio: stats.SpreadOf(r50), P99Ratio: stats.SpreadOf(r99),
		})
	}
	return out
}

func cpuOf(s OpenStep, name string) (float64, bool) {
	for _, c := range s.CPU {
		if c.Name == name {
			return c.Seconds, true
		}
	}
	return 0, false
}

// Aim is one aim of the overhead issue with its verdict.
type Aim struct {
	Name    string  `json:"name"`
	Target  string  `json:"target"`
	Value   float64 `json:"value"`
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	Verdict string  `json:"verdict"`
	Rounds  int     `json:"rounds"` // the rounds judged on
}

// minAimRounds is the fewest usable rounds a latency or CPU verdict is
// given on: with 3, the range holds the median with probability 3/4.
const minAimRounds = 3

// aims judges the router (admission off) against the floor: the
// latency and CPU aims on the rounds' range, the sustained rate on the one
// search.
func aims(r *OpenReport) []Aim {
	var out []Aim
	at := func(rate float64, bytes int) (FloorPoint, bool) {
		for _, f := range r.Floor {
			if f.Config == configRouter && f.Rate == rate && f.Bytes == bytes {
				return f, true
			}
		}
		return FloorPoint{}, false
	}
	most := func(name string, s stats.Spread, t float64, unit string) {
		a := Aim{
			Name: name, Target: fmt.Sprintf("≤ %g%s", t, unit), Rounds: len(s.Rounds),
			Value: s.Median, Lo: s.Min, Hi: s.Max, Verdict: stats.AtMost(stats.Estimate{Lo: s.Min, Hi: s.Max}, t),
		}
		if a.Rounds < minAimRounds {
			a.Verdict = stats.NotSettled
		}
		out = append(out, a)
	}
	if f, ok := at(500, 1<<10); ok {
		most("1 KB at 500 req/s: router added p50 ÷ no-op's", f.P50Ratio, 1.5, "×")
		most("1 KB at 500 req/s: router added p99 ÷ no-op's", f.P99Ratio, 2, "×")
		most("router CPU per 1 KB request", f.CPUMicros, 60, " µs")
	}
	if f, ok := at(100, 256<<10); ok {
		most("256 KB at 100 req/s: router added p50 ÷ no-op's", f.P50Ratio, 1.3, "×")
		most("router CPU per 256 KB request", f.CPUMicros, 400, " µs")
	}
	for _, bytes := range []int{1 << 10, 256 << 10} {
		var router, noop *SustainedRate
		for i, s := range r.Sustained {
			if s.Bytes != bytes {
				continue
			}
			switch s.Config {
			case configRouter:
				router = &r.Sustained[i]
			case configNoop:
				noop = &r.Sustained[i]
			}
		}
		if router == nil || noop == nil || noop.Rate == 0 {
			continue
		}
		v := router.Rate / noop.Rate
		// A search that stopped at its limit still sustaining gives a
		// lower bound only.
		a := Aim{Name: "highest sustained rate, " + sizeWord(bytes) + ": router ÷ no-op", Target: "≥ 0.8×", Value: v, Lo: v, Hi: v, Rounds: 1}
		switch {
		case v >= 0.8 && !noop.Capped:
			a.Verdict = stats.Met
		case v < 0.8 && !router.Capped:
			a.Verdict = stats.Missed
		default:
			a.Verdict = stats.NotSettled
		}
		out = append(out, a)
	}
	return out
}

// markdownFloor writes the floor table and the aims.
func (r *OpenReport) markdownFloor(w io.Writer) {
	fmt.Fprintf(w, "## Added latency and CPU, %d rounds\n\nEach round measures every configuration at each point, in a rotating order; added latency is against Envoy alone in the same round. Median [min–max] over the rounds.\n\n", r.Rounds)
	fmt.Fprintln(w, "| configuration | rate req/s | body | added p50 ms | added p99 ms | ÷ no-op p50 | ÷ no-op p99 | ext_proc CPU µs/request |\n|---|---|---|---|---|---|---|---|")
	for _, f := range r.Floor {
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", f.Config, f.Rate, sizeWord(f.Bytes),
			spreadCell(f.AddedP50, "%+.3f"), spreadCell(f.AddedP99, "%+.3f"), spreadCell(f.P50Ratio, "%.2f"), spreadCell(f.P99Ratio, "%.2f"), spreadCell(f.CPUMicros, "%.0f"))
	}
	fmt.Fprintf(w, "\nA ratio counts the rounds where the no-op added more than nothing. CPU is utime+stime from /proc/<pid>/stat over the step, divided by the requests sent.\n")
	fmt.Fprintf(w, "\n## Aims (router, admission off, against the no-op ext_proc)\n\nCPU: %s. A verdict needs %d usable rounds; met or missed when the whole range is on one side of the target.\n\n| aim | target | median [min–max] | rounds | verdict |\n|---|---|---|---|---|\n", r.Machine, minAimRounds)
	for _, a := range r.Aims {
		fmt.Fprintf(w, "| %s | %s | %.2f [%.2f–%.2f] | %d | %s |\n", a.Name, a.Target, a.Value, a.Lo, a.Hi, a.Rounds, a.Verdict)
	}
	fmt.Fprintln(w)
}

func spreadCell(s stats.Spread, f string) string {
	if len(s.Rounds) == 0 {
		return "–"
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s.Median, s.Min, s.Max)
}
