package benchmark

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runFolder creates <results>/<UTC time>-<kind> for a run's files.
func runFolder(results, kind string, at time.Time) (string, error) {
	dir := filepath.Join(results, at.UTC().Format("20060102-150405")+"-"+kind)
	return dir, os.MkdirAll(dir, 0o750)
}

// publishLatest copies the named files of dir into <results>/latest, the
// stable copy the README embeds, replacing older copies of the same files.
func publishLatest(results, dir string, files []string) error {
	latest := filepath.Join(results, "latest")
	if err := os.MkdirAll(latest, 0o750); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(latest, f), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeCompare writes the comparison's JSON, CSV, plots and report.md into
// a run folder and publishes them to latest/.
func writeCompare(results string, rep *CompareReport) error {
	dir, err := runFolder(results, "compare", rep.Started)
	if err != nil {
		return err
	}
	files := []string{"compare.json", "compare.csv", "report.md", plotTTFTCDF, plotE2ECDF, plotP99Load, plotInflight}
	if err := writeJSON(filepath.Join(dir, "compare.json"), rep); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "compare.csv"), func(w io.Writer) error { return summaryCSV(w, rep.Runs) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "requests.csv"), func(w io.Writer) error { return requestsCSV(w, rep) }); err != nil {
		return err
	}
	if err := writePlots(dir, rep, 0.8); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "report.md"), func(w io.Writer) error { rep.Markdown(w); return nil }); err != nil {
		return err
	}
	return publishLatest(results, dir, files)
}

func writeFile(path string, fill func(io.Writer) error) error {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// summaryCSV writes one row per run.
func summaryCSV(w io.Writer, runs []*Run) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{
		"setup", "load", "offered_rate", "requests", "ok", "unfinished", "errors", "error_rate",
		"ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "itl_p99_ms",
		"tokens_per_s_mean", "tokens_per_s_cv", "throughput", "goodput", "good_fraction",
		"cpu_cores_ours", "machine_busy_cores", "saturated", "lower_bounds",
	})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, r := range runs {
		s := r.Summary
		_ = cw.Write([]string{
			s.Setup, f(s.Load), f(s.Rate), strconv.Itoa(s.Requests), strconv.Itoa(s.OK), strconv.Itoa(s.Unfinished),
			strconv.Itoa(s.Errors), f(s.ErrorRate), f(s.TTFTP50), f(s.TTFTP95), f(s.TTFTP99), f(s.E2EP50), f(s.E2EP99),
			f(s.ITLP99), f(s.TPSMean), f(s.TPSCV), f(s.Throughput), f(s.Goodput), f(s.GoodFraction),
			f(r.Cores), f(r.MachineCores), strconv.FormatBool(r.Saturated), strings.Join(s.LowerBounds, " "),
		})
	}
	cw.Flush()
	return cw.Error()
}

// requestsCSV writes every request of every run, measured or not.
func requestsCSV(w io.Writer, rep *CompareReport) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"setup", "load", "index", "measured", "start_ms", "ttft_ms", "e2e_ms", "tokens", "status", "worker", "cut", "error"})
	for _, r := range rep.Runs {
		for i, res := range r.results {
			m := i >= rep.Measured[0] && i < rep.Measured[1]
			_ = cw.Write([]string{
				r.Summary.Setup, strconv.FormatFloat(r.Summary.Load, 'f', 2, 64), strconv.Itoa(i), strconv.FormatBool(m),
				fmt.Sprintf("%.1f", ms(res.Start)), fmt.Sprintf("%.1f", ms(res.TTFT)), fmt.Sprintf("%.1f", ms(res.Latency)),
				strconv.Itoa(res.Tokens), strconv.Itoa(res.Status), res.Node, strconv.FormatBool(res.Cut), res.Err,
			})
		}
	}
	cw.Flush()
	return cw.Error()
}

// Markdown writes the report: setup, capacity, one table per load, the
// aims, the CPU table and the plots.
func (r *CompareReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# llm-router benchmark: strategy comparison\n\n")
	fmt.Fprintf(w, "- **Command**: `%s`\n", r.Command)
	fmt.Fprintf(w, "- **Machine**: %s\n", r.Machine)
	fmt.Fprintf(w, "- **Started**: %s, %.0f s of wall time\n", r.Started.UTC().Format(time.RFC3339), r.WallTime)
	fmt.Fprintf(w, "- **Workload**: %s; lengths from %s\n", r.Workload, r.Trace)
	fmt.Fprintf(w, "- **Runs**: %d requests each, requests %d to %d measured (the first warm the fleet, the last keep the load steady until the measured ones end)\n",
		r.Requests, r.Measured[0]+1, r.Measured[1])
	fmt.Fprintf(w, "- **SLO** (goodput): TTFT ≤ %v and each request's p99 inter-token gap ≤ %v\n", r.SLO.TTFT, r.SLO.ITL)
	fmt.Fprintf(w, "- **Time scale**: %g (times are GPU time)\n", r.TimeScale)
	if len(r.Void) > 0 {
		fmt.Fprintf(w, "\n> **VOID**: the machine was saturated (over %.0f%% of its cores busy) during %d run(s): %s. Latency differences in those runs may be the machine's, not the configurations'.\n",
			100*saturationShare, len(r.Void), strings.Join(r.Void, "; "))
	} else {
		fmt.Fprintf(w, "\n**Valid**: the machine stayed below %.0f%% of its cores busy in every run (see the CPU table).\n", 100*saturationShare)
	}

	fmt.Fprintf(w, "\n## Fleet\n\nOne `gpusim --fleet` process; every GPU serves model `%s`.\n\n", Model)
	fmt.Fprintln(w, "| GPU | profile | alone: saturation req/s | router max_concurrency |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, g := range r.Fleet {
		fmt.Fprintf(w, "| %s | %s | %.2f | %d |\n", g.ID, g.Profile, g.SaturationRate, g.Cap)
	}
	fmt.Fprintf(w, "\nCap rule: Little's law at %.0f%% of the GPU's saturation rate on this workload, i.e. the mean number of requests it holds there (rate × mean end-to-end latency, gpusim in virtual time). The emulations of other schedulers run uncapped.\n", 100*capLoad)

	c := r.Capacity
	fmt.Fprintf(w, "\n## Capacity\n\n**%.2f req/s**, measured with %s. ", c.Rate, c.Setup)
	if len(c.Probes) > 0 {
		fmt.Fprintf(w, "A rate (req/s of GPU time, Poisson arrivals of the workload) is sustainable when an open-loop run of %d requests at that rate keeps the median TTFT of its measured requests ≤ %.0f ms with under 1%% errors; the capacity is the highest sustainable rate found (search from 85%% of the fleet estimate, 15%% steps, then bisection to 5%%). The bound sits at the knee of the TTFT curve, which a run of any length reaches within a few percent of saturation; the 2 s SLO would be reached only well above saturation by a run this short.\n\n", c.Requests, c.BoundMs)
		fmt.Fprintln(w, "| probe rate req/s | median TTFT ms | sustainable | machine saturated |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, p := range c.Probes {
			fmt.Fprintf(w, "| %.2f | %.0f | %s | %s |\n", p.Rate, p.TTFTP50, yesNo(p.Sustainable), yesNo(p.Saturated))
		}
	}
	fmt.Fprintf(w, "\nFleet estimate (sum of the GPUs' saturation rates alone, a perfect balancer's capacity): %.2f req/s.\n", c.Estimate)

	for _, load := range r.Loads {
		fmt.Fprintf(w, "\n## %.0f%% of capacity\n\n", 100*load)
		summaryTable(w, runsAt(r.Runs, load))
	}
	if len(r.Aims) > 0 {
		fmt.Fprintf(w, "\n## Aims (same run)\n\n")
		fmt.Fprintln(w, "| aim | load | ratio | target | met | values |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, a := range r.Aims {
			fmt.Fprintf(w, "| %s | %.0f%% | %.3f | %s | %s | %s |\n", a.Name, 100*a.Load, a.Ratio, a.Target, yesNo(a.Met), a.Detail)
		}
	}
	r.cpuTable(w)
	fmt.Fprintf(w, "\n## Plots\n\n![TTFT CDF](%s)\n\n![E2E CDF](%s)\n\n![p99 TTFT vs load](%s)\n\n![in-flight per GPU](%s)\n",
		plotTTFTCDF, plotE2ECDF, plotP99Load, plotInflight)
	fmt.Fprintf(w, "\n## Notes\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

// summaryTable writes the main per-setup table of one load.
func summaryTable(w io.Writer, runs []*Run) {
	fmt.Fprintln(w, "| setup | TTFT p50 | p95 | p99 | E2E p50 | p99 | ITL p99 | tok/s mean | tok/s CV | completed req/s | errors | goodput req/s | good |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		s := r.Summary
		v := func(name string, x float64) string {
			if slices.Contains(s.LowerBounds, name) {
				return fmt.Sprintf("≥%.0f", x)
			}
			return fmt.Sprintf("%.0f", x)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.0f | %.1f | %.3f | %.2f | %.1f%% | %.2f | %.1f%% |\n",
			s.Setup, v("ttft_p50_ms", s.TTFTP50), v("ttft_p95_ms", s.TTFTP95), v("ttft_p99_ms", s.TTFTP99),
			v("e2e_p50_ms", s.E2EP50), v("e2e_p99_ms", s.E2EP99), s.ITLP99, s.TPSMean, s.TPSCV, s.Throughput,
			100*s.ErrorRate, s.Goodput, 100*s.GoodFraction)
	}
	fmt.Fprintln(w, "\nTimes in ms (GPU time); ≥ marks a percentile that fell on a request still running when the run was cut. tok/s: each request's decode rate after its first token, mean and coefficient of variation across requests. completed req/s: measured requests completed per second of the span over which they arrived (the offered rate when all complete). good: share of measured requests within the SLO.")
}

// cpuTable writes every run's CPU per process and the machine's load.
func (r *CompareReport) cpuTable(w io.Writer) {
	var names []string
	for _, run := range r.Runs {
		for _, u := range run.CPU {
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "\n## CPU\n\nCores used during each run (utime+stime from /proc/<pid>/stat over the run's wall time), and the whole machine's busy cores (/proc/stat, every process, ours or not).\n\n")
	fmt.Fprintf(w, "| run | %s | ours | machine | saturated |\n|---|", strings.Join(names, " | "))
	fmt.Fprint(w, strings.Repeat("---|", len(names)+3), "\n")
	rows := append([]*Run(nil), r.Runs...)
	for _, p := range r.Capacity.Probes {
		if p.Run != nil {
			rows = append(rows, p.Run)
		}
	}
	for _, run := range rows {
		label := fmt.Sprintf("%.0f%% %s", 100*run.Summary.Load, run.Summary.Setup)
		if run.Summary.Load == 0 {
			label = fmt.Sprintf("probe %.2f req/s %s", run.Summary.Rate, run.Summary.Setup)
		}
		fmt.Fprintf(w, "| %s |", label)
		for _, n := range names {
			cell := " - |"
			for _, u := range run.CPU {
				if u.Name == n {
					cell = fmt.Sprintf(" %.2f |", u.Cores)
				}
			}
			fmt.Fprint(w, cell)
		}
		fmt.Fprintf(w, " %.2f | %.2f / %d | %s |\n", run.Cores, run.MachineCores, run.MachineCPUs, yesNo(run.Saturated))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
