package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// PDAim is one aim's verdict for one configuration.
type PDAim struct {
	Config  string  `json:"config"`
	QPS     float64 `json:"qps"`
	Aim     string  `json:"aim"`
	Figure  string  `json:"figure"`
	Verdict string  `json:"verdict"`
}

// Aims judges every disaggregated configuration against the aggregated
// fleet at its rate: p99 ITL at most AimITLRatio of it and goodput at
// least AimGoodRatio of it, from their intervals (stats.AtMost,
// stats.AtLeast); and no mostly cached prompt disaggregated, a count.
func (r *PDReport) Aims() []PDAim {
	var out []PDAim
	for _, s := range r.Summaries {
		if s.Prefill == 0 || s.ITLRatio == nil {
			continue
		}
		out = append(out,
			PDAim{s.Label(), s.QPS, fmt.Sprintf("p99 ITL / aggregated <= %g", AimITLRatio), ratioCell(*s.ITLRatio), stats.AtMost(*s.ITLRatio, AimITLRatio)},
			PDAim{s.Label(), s.QPS, fmt.Sprintf("goodput / aggregated >= %g", AimGoodRatio), ratioCell(*s.GoodRatio), stats.AtLeast(*s.GoodRatio, AimGoodRatio)},
		)
		v := stats.Met
		if s.MostlyCachedDisaggregated > 0 {
			v = stats.Missed
		}
		out = append(out, PDAim{
			s.Label(), s.QPS, "mostly cached prompts disaggregated = 0",
			fmt.Sprintf("%d of %d disaggregated", s.MostlyCachedDisaggregated, s.Disaggregated), v,
		})
	}
	return out
}

func ratioCell(e stats.Estimate) string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", e.Value, e.Lo, e.Hi)
}

// WriteJSON writes the report and its aims as indented JSON.
func (r *PDReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*PDReport
		Aims []PDAim `json:"aims"`
	}{r, r.Aims()})
}

// WriteMarkdown writes the study, one table row per configuration, and
// the aims' verdicts.
func (r *PDReport) WriteMarkdown(w io.Writer) {
	s := r.Study
	fmt.Fprintf(w, "# Prefill/decode disaggregation, simulated\n\n")
	if r.Command != "" {
		fmt.Fprintf(w, "Command: `%s`\n\n", r.Command)
	}
	var fleet []string
	for _, g := range s.GPUs {
		fleet = append(fleet, fmt.Sprintf("%d × %s", g.Count, g.Profile))
	}
	fmt.Fprintf(w, "- Fleet: %s; engines max_num_seqs %d, max_batched_tokens %d, gpu_mem_util %g; KV link %g Gbit/s\n",
		strings.Join(fleet, ", "), s.Engine.MaxNumSeqs, s.Engine.MaxBatchedTokens, s.Engine.GPUMemUtil, s.LinkGbps)
	fmt.Fprintf(w, "- Workload: %s\n", describeWorkload(s.Workload))
	fmt.Fprintf(w, "- Router: strategy %s, %d replica(s), snapshot refresh %v\n", s.Strategies[0], s.Replicas[0], s.Router.RefreshInterval)
	fmt.Fprintf(w, "- SLO (goodput): TTFT ≤ %v and the request's own p99 gap between tokens ≤ %v; seeds %v\n", s.SLO.TTFT, s.SLO.TPOT, s.Seeds)
	fmt.Fprintf(w, "- Wall time: %.1f s\n\n", r.Wall.Seconds())
	fmt.Fprintln(w, "Latencies in ms of virtual time, `value [95 % interval]` over seeds and requests (block bootstrap); ITL pools every gap between two tokens of a request. Goodput is requests within the SLO per second, median over seeds [min, max]. `t` is the decider's threshold (uncached prompt tokens); disagg. counts the requests paired with a prefill GPU, cached the paired ones whose decode GPU held more than half the prompt, under the paired ones whose prompt past what the decode GPU held was under the threshold (the router's prefix index and the engine's cache disagreeing).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| config | QPS | TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 | ITL p90 | ITL p99 | good | goodput req/s | ITL p99 / agg. | good / agg. | disagg. | cached | under | refused |")
	fmt.Fprintln(w, "|---|---:|---|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|")
	for _, m := range r.Summaries {
		itlR, goodR := "–", "–"
		if m.ITLRatio != nil {
			itlR, goodR = ratioCell(*m.ITLRatio), ratioCell(*m.GoodRatio)
		}
		fmt.Fprintf(w, "| %s | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d |\n",
			m.Label(), m.QPS,
			report.MsCell(m.TTFT[0]), report.MsCell(m.TTFT[1]), report.MsCell(m.TTFT[2]),
			report.MsCell(m.ITL[0]), report.MsCell(m.ITL[1]), report.MsCell(m.ITL[2]),
			pct(m.Good), spread(m.Goodput, 2, 1), itlR, goodR, m.Disaggregated, m.MostlyCachedDisaggregated, m.UnderThreshold, m.Refused)
	}
	aims := r.Aims()
	if len(aims) == 0 {
		return
	}
	fmt.Fprintln(w, "\nAims, judged by the 95 % interval of each ratio (met: the whole interval on the good side; missed: the whole of it on the bad side; not settled: it straddles the target):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| config | QPS | aim | figure | verdict |")
	fmt.Fprintln(w, "|---|---:|---|---|---|")
	for _, a := range aims {
		fmt.Fprintf(w, "| %s | %g | %s | %s | %s |\n", a.Config, a.QPS, a.Aim, a.Figure, a.Verdict)
	}
}
