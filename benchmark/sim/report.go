package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as a Markdown page: the study, then
// one table row per configuration.
func (r *Report) WriteMarkdown(w io.Writer) {
	s := r.Study
	fmt.Fprintf(w, "# Fleet simulation\n\n")
	if r.Command != "" {
		fmt.Fprintf(w, "Command: `%s`\n\n", r.Command)
	}
	var fleet []string
	for _, g := range s.GPUs {
		c := "uncapped"
		if g.MaxConcurrency > 0 {
			c = fmt.Sprintf("max_concurrency %d", g.MaxConcurrency)
		}
		fleet = append(fleet, fmt.Sprintf("%d × %s (%s)", g.Count, g.Profile, c))
	}
	fmt.Fprintf(w, "- Fleet: %s; engines max_num_seqs %d, max_batched_tokens %d, gpu_mem_util %g",
		strings.Join(fleet, ", "), s.Engine.MaxNumSeqs, s.Engine.MaxBatchedTokens, s.Engine.GPUMemUtil)
	if s.Engine.MaxLoras > 0 {
		fmt.Fprintf(w, ", max_loras %d, adapter load %g ms", s.Engine.MaxLoras, s.Engine.LoRALoadMs)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- Workload: %s\n", describeWorkload(s.Workload))
	fmt.Fprintf(w, "- Router: snapshot refresh %v, scrape period %s, telemetry stale after %v\n",
		s.Router.RefreshInterval, scrapeLabel(s.Router), s.Router.TelemetryStale)
	fmt.Fprintf(w, "- SLO: TTFT ≤ %v, TPOT ≤ %v; seeds %v\n", s.SLO.TTFT, s.SLO.TPOT, s.Seeds)
	fmt.Fprintf(w, "- Simulator: %d events in %.1f s of wall time (%.0f events/s)\n\n",
		r.Events, r.Wall.Seconds(), float64(r.Events)/max(r.Wall.Seconds(), 1e-9))
	fmt.Fprintln(w, "Latencies in ms of virtual time, `value [95 % interval]` over seeds and requests; goodput, output tokens/s and prefix hit rate are the median over seeds [min, max].")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Snapshot age is the mean age (ms) of the snapshot each decision was made on (the JSON also has the share of decisions whose live claim changed the snapshot's pick). Queued is the share of requests that waited in the router's queue, and their mean wait (ms); refused counts requests the router turned away (queue full, timed out, or past their TTFT objective).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| strategy | replicas | QPS | TTFT p50 | TTFT p90 | TTFT p99 | TPOT p50 | TPOT p90 | good | goodput req/s | output tok/s | prefix hit | queued (wait) | refused | snapshot age | events/s |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|")
	for _, m := range r.Summaries {
		fmt.Fprintf(w, "| %s | %d | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f%% (%.0f) | %d | %.0f | %.0f |\n",
			m.Strategy, m.Replicas, m.QPS,
			report.MsCell(m.TTFT[0]), report.MsCell(m.TTFT[1]), report.MsCell(m.TTFT[2]),
			report.MsCell(m.TPOT[0]), report.MsCell(m.TPOT[1]),
			pct(m.Good), spread(m.Goodput, 2, 1), spread(m.OutputTokens, 0, 1), spread(m.PrefixHit, 1, 100),
			100*m.Queued, m.QueueWait, m.Refused+m.TooLong, m.SnapshotAge, m.EventsPerSecond())
	}
	r.writeRatios(w)
	r.writePredictionErrors(w)
	r.writeLoRA(w)
	r.writeMisses(w)
	writeAims(w, r.Aims)
}

// writeRatios writes the TTFT p90 ratios to the baselines, when any.
func (r *Report) writeRatios(w io.Writer) {
	header := false
	for _, m := range r.Summaries {
		for _, b := range RatioBaselines {
			e, ok := m.P90Ratio[b]
			if !ok {
				continue
			}
			if !header {
				fmt.Fprintln(w, "\nTTFT p90 over a baseline's at the same replicas and rate, `ratio [95 % interval]` (paired bootstrap over seeds and requests):")
				fmt.Fprintln(w)
				fmt.Fprintln(w, "| strategy | replicas | QPS | baseline | TTFT p90 ratio |")
				fmt.Fprintln(w, "|---|---:|---:|---|---|")
				header = true
			}
			fmt.Fprintf(w, "| %s | %d | %g | %s | %.3f [%.3f, %.3f] |\n", m.Strategy, m.Replicas, m.QPS, b, e.Value, e.Lo, e.Hi)
		}
	}
}

func pct(e stats.Estimate) string {
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*e.Value, 100*e.Lo, 100*e.Hi)
}

// spread renders a Spread scaled by scale with prec decimals.
func spread(s stats.Spread, prec int, scale float64) string {
	if len(s.Rounds) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f [%.*f, %.*f]", prec, s.Median*scale, prec, s.Min*scale, prec, s.Max*scale)
}

func scrapeLabel(r Router) string {
	if r.ScrapePeriod > 0 {
		return r.ScrapePeriod.String()
	}
	return fmt.Sprintf("%v (50ms for the emulations with queue and KV scorers)", r.scrapePeriod(""))
}

func describeWorkload(w Workload) string {
	mt := w.MaxTokens
	if mt == "" {
		mt = "default"
	}
	if w.Kind == KindLoRA {
		l := w.LoRA
		n := w.Requests
		if n == 0 {
			n = defaultLoRARequests
		}
		shift := "fixed popularity"
		if l.ShiftEvery > 0 {
			shift = fmt.Sprintf("the ranking rotating by %d every %v", l.shiftBy(), l.ShiftEvery)
		}
		return fmt.Sprintf("lora: %d adapters of one base model, Zipf popularity s=%g, %s; prompts %d and outputs %d tokens (±50 %%), %d requests, Poisson arrivals",
			l.Adapters, l.ZipfS, shift, l.PromptLen, l.OutputLen, n)
	}
	if w.Kind == KindSummarization {
		n := w.Requests
		if n == 0 {
			n = defaultTraceRequests
		}
		return fmt.Sprintf("summarization: %d requests, prompts uniform in [%d, %d] tokens, outputs in [%d, %d], no shared prefix, Poisson arrivals, max_tokens %s",
			n, SummaryPromptMin, SummaryPromptMax, SummaryOutputMin, SummaryOutputMax, mt)
	}
	if w.Kind == KindSharedPrefix {
		sp := w.SharedPrefix
		n := "every prompt once"
		if w.Requests > 0 {
			n = fmt.Sprintf("%d requests", w.Requests)
		}
		return fmt.Sprintf("shared_prefix num_groups=%d num_prompts_per_group=%d system_prompt_len=%d question_len=%d output_len=%d, %s, Poisson arrivals, max_tokens %s",
			sp.NumGroups, sp.NumPromptsPerGroup, sp.SystemPromptLen, sp.QuestionLen, sp.OutputLen, n, mt)
	}
	n := w.Requests
	if n == 0 {
		n = defaultTraceRequests
	}
	arr := "Poisson arrivals"
	if w.Arrivals == ArrivalsTrace {
		arr = "the trace's arrivals rescaled to each rate"
	}
	return fmt.Sprintf("trace %s, first %d rows, %s, max_tokens %s", w.Trace, n, arr, mt)
}
