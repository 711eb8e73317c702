package sim

import (
	"fmt"
	"io"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// The LoRA study's targets for the router's default strategy against the
// GIE LoRA emulation at the same replicas and rate.
const (
	loraAimP90   = 0.7
	loraAimLoads = 0.5
)

const (
	judgeRatio = "ratio: 95 % interval of the seed-paired bootstrap"
	judgeCount = "count over every seed: met at 0"
)

// LoRAAims judges the router's default strategy (config.Default's) on a
// LoRA study's summaries, at each replica count and rate: p90 TTFT at most
// 0.7× the GIE LoRA emulation's, adapter loads per 1,000 requests at most
// 0.5× its, and no request failed for a missing adapter. A ratio's verdict
// reads its 95 % interval (stats.AtMost); an aim whose baseline was not
// run is not judged.
func LoRAAims(sums []Summary) []report.Aim {
	def := config.Default().Strategy
	var aims []report.Aim
	for _, m := range sums {
		if m.Strategy != def || m.LoRA == nil {
			continue
		}
		at := fmt.Sprintf(" (%d replicas, %g req/s)", m.Replicas, m.QPS)
		gie := emulate.LoRAQueueKVMaxScore
		p90, ok := m.P90Ratio[gie]
		aims = append(aims, ratioAim("p90 TTFT, "+def+" / GIE LoRA emulation"+at, p90, ok, loraAimP90))
		loads, ok := m.LoRA.LoadsRatio[gie]
		aims = append(aims, ratioAim("adapter loads per 1,000 requests, "+def+" / GIE LoRA emulation"+at, loads, ok, loraAimLoads))
		missing := report.Aim{
			Name: "requests failed for a missing adapter, " + def + at, Target: "= 0", Judges: judgeCount,
			Ratio: stats.Estimate{Value: float64(m.LoRA.MissingAdapter)}, Verdict: stats.Met,
			Detail: fmt.Sprintf("%d of %d requests", m.LoRA.MissingAdapter, m.Requests),
		}
		if m.LoRA.MissingAdapter > 0 {
			missing.Verdict = stats.Missed
		}
		aims = append(aims, missing)
	}
	return aims
}

func ratioAim(name string, e stats.Estimate, ok bool, target float64) report.Aim {
	a := report.Aim{Name: name, Ratio: e, Target: fmt.Sprintf("<= %g", target), Judges: judgeRatio}
	if !ok {
		a.Verdict = report.NotJudged
		return a
	}
	a.Verdict = stats.AtMost(e, target)
	a.Detail = fmt.Sprintf("per seed: %s", floats(e.Seeds))
	return a
}

func floats(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.2f", x)
	}
	return out
}

// writeLoRA writes a LoRA study's adapter figures, its ratios to the GIE
// LoRA emulation and its aims.
func (r *Report) writeLoRA(w io.Writer) {
	header := false
	for _, m := range r.Summaries {
		l := m.LoRA
		if l == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nAdapters: loads (an adapter entering a GPU slot, every GPU) per 1,000 requests and per minute, median over seeds [min, max]; requests that failed because no GPU served their adapter; TTFT p90 and loads per 1,000 over the GIE LoRA emulation's, `ratio [95 % interval]` (seed-paired bootstrap):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| strategy | replicas | QPS | TTFT p90 | loads / 1,000 req | loads / min | goodput req/s | missing adapter | TTFT p90 / GIE LoRA | loads / GIE LoRA |")
			fmt.Fprintln(w, "|---|---:|---:|---|---|---|---|---:|---|---|")
			header = true
		}
		p90, loads := "–", "–"
		if e, ok := m.P90Ratio[emulate.LoRAQueueKVMaxScore]; ok {
			p90 = fmt.Sprintf("%.3f [%.3f, %.3f]", e.Value, e.Lo, e.Hi)
		}
		if e, ok := l.LoadsRatio[emulate.LoRAQueueKVMaxScore]; ok {
			loads = fmt.Sprintf("%.3f [%.3f, %.3f]", e.Value, e.Lo, e.Hi)
		}
		fmt.Fprintf(w, "| %s | %d | %g | %s | %s | %s | %s | %d | %s | %s |\n",
			m.Strategy, m.Replicas, m.QPS, report.MsCell(m.TTFT[1]),
			spread(l.LoadsPer1000, 1, 1), spread(l.LoadsPerMinute, 1, 1), spread(m.Goodput, 2, 1),
			l.MissingAdapter, p90, loads)
	}
}
