package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// Write writes the comparison's JSON, CSVs, plots and report into
// a run folder and publishes them to latest/, every file named after the
// comparison (compare-<name>.json, report-<name>.md, ...).
func Write(results string, rep *Report) error {
	dir, err := record.Folder(results, "compare-"+rep.Name, rep.Started)
	if err != nil {
		return err
	}
	n := func(base, ext string) string { return base + "-" + rep.Name + ext }
	files := []string{n("compare", ".json"), n("compare", ".csv"), n("report", ".md"), n("ttft-cdf", ".png"), n("e2e-cdf", ".png"), n("ttft-p99-vs-load", ".png"), n("hit-rate", ".png"), n("inflight", ".png")}
	if err := record.WriteJSON(filepath.Join(dir, files[0]), rep); err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, files[1]), func(w io.Writer) error { return summaryCSV(w, rep.Runs) }); err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, n("requests", ".csv")), func(w io.Writer) error { return requestsCSV(w, rep) }); err != nil {
		return err
	}
	if err := WritePlots(dir, rep, 0.8, files[3:]); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if err := record.WriteFile(filepath.Join(dir, files[2]), func(w io.Writer) error { rep.markdown(w, files[3:]); return nil }); err != nil {
		return err
	}
	return record.Publish(results, dir, files)
}

// summaryCSV writes one row per run.
func summaryCSV(w io.Writer, runs []*Run) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{
		"setup", "load", "seed", "prefix_hit_rate", "offered_rate", "requests", "ok", "unfinished", "errors", "error_rate",
		"ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "itl_p99_ms",
		"tokens_per_s_mean", "tokens_per_s_cv", "throughput", "goodput", "good_fraction",
		"cpu_cores_ours", "machine_busy_cores", "saturated", "lower_bounds",
	})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, r := range runs {
		s := r.Summary
		_ = cw.Write([]string{
			s.Setup, f(s.Load), strconv.FormatUint(r.Seed, 10), f(r.HitRate), f(s.Rate), strconv.Itoa(s.Requests), strconv.Itoa(s.OK), strconv.Itoa(s.Unfinished),
			strconv.Itoa(s.Errors), f(s.ErrorRate), f(s.TTFTP50), f(s.TTFTP95), f(s.TTFTP99), f(s.E2EP50), f(s.E2EP99),
			f(s.ITLP99), f(s.TPSMean), f(s.TPSCV), f(s.Throughput), f(s.Goodput), f(s.GoodFraction),
			f(r.Cores), f(r.MachineCores), strconv.FormatBool(r.Saturated), strings.Join(s.LowerBounds, " "),
		})
	}
	cw.Flush()
	return cw.Error()
}

// requestsCSV writes every request of every run, measured or not, with
// its own p99 inter-token gap and whether it met both SLOs, so a miss of
// the goodput can be traced to its worker.
func requestsCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"setup", "load", "seed", "index", "measured", "start_ms", "ttft_ms", "e2e_ms", "tokens", "status", "worker", "cut", "error", "itl_p99_ms", "good"})
	for _, r := range rep.Runs {
		for i, res := range r.Results {
			m := i >= rep.Measured[0] && i < rep.Measured[1]
			itlP99 := "" // no gaps: under two tokens, or not streamed
			if len(res.ITLs) > 0 {
				itlP99 = fmt.Sprintf("%.1f", stats.Ms(stats.Percentile(res.ITLs, 99)))
			}
			_ = cw.Write([]string{
				r.Summary.Setup, strconv.FormatFloat(r.Summary.Load, 'f', 2, 64), strconv.FormatUint(r.Seed, 10), strconv.Itoa(i), strconv.FormatBool(m),
				fmt.Sprintf("%.1f", stats.Ms(res.Start)), fmt.Sprintf("%.1f", stats.Ms(res.TTFT)), fmt.Sprintf("%.1f", stats.Ms(res.Latency)),
				strconv.Itoa(res.Tokens), strconv.Itoa(res.Status), res.Node, strconv.FormatBool(res.Cut), res.Err,
				itlP99, strconv.FormatBool(rep.SLO.Good(res)),
			})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes r's report with the default plot names.
func WriteMarkdown(w io.Writer, r *Report) {
	n := func(base string) string { return base + "-" + r.Name + ".png" }
	r.markdown(w, []string{n("ttft-cdf"), n("e2e-cdf"), n("ttft-p99-vs-load"), n("hit-rate"), n("inflight")})
}

// markdown writes the report: setup, fleet, capacity, the pooled tables
// per load with their intervals, the aims, the CPU table and the plots.
func (r *Report) markdown(w io.Writer, plots []string) {
	fmt.Fprintf(w, "# llm-router benchmark: strategy comparison, %s\n\n", r.Name)
	fmt.Fprintf(w, "- **Command**: `%s`\n", r.Command)
	fmt.Fprintf(w, "- **Machine**: %s\n", r.Machine)
	fmt.Fprintf(w, "- **Started**: %s, %.0f s of wall time\n", r.Started.UTC().Format(time.RFC3339), r.WallTime)
	fmt.Fprintf(w, "- **Workload**: %s; from %s\n", r.Workload, r.Trace)
	fmt.Fprintf(w, "- **Seeds**: %s; each draws its own window of the trace and its own arrivals, and every configuration runs every seed\n", joinUints(r.Seeds))
	fmt.Fprintf(w, "- **Runs**: %d requests each, requests %d to %d measured (%d a seed); the first warm the fleet, the last keep the load steady until the measured ones end, and a run ends when its measured requests end\n",
		r.Requests, r.Measured[0]+1, r.Measured[1], r.Measured[1]-r.Measured[0])
	fmt.Fprintf(w, "- **SLO** (goodput): TTFT ≤ %v and each request's p99 inter-token gap ≤ %v\n", r.SLO.TTFT, r.SLO.ITL)
	fmt.Fprintf(w, "- **Time scale**: %g (times are GPU time)\n", r.TimeScale)
	lo, hi := blockRange(r.Stats)
	fmt.Fprintf(w, "- **Intervals**: [lo, hi] is a 95%% two-level bootstrap interval (%d replicates, each drawing the seeds with replacement, so that the spread between runs is in it, then rebuilding each drawn seed's measured requests from blocks of consecutive ones, since neighbours in time share a queue; ratios pair the seed draws; each seed's block length chosen from its own autocorrelation by the Politis–White rule: %d to %d requests in this run); the per-seed values and blocks are in compare-%s.json\n", stats.Replicates, lo, hi, r.Name)
	if err := r.VoidError(""); err != nil && len(r.Runs) > 0 {
		fmt.Fprintf(w, "\n> **VOID comparison**: every run was void, so nothing below measures the configurations. %s.\n", strings.TrimPrefix(err.Error(), ErrVoid.Error()+": "))
	}
	if len(r.Void) > 0 {
		fmt.Fprintf(w, "\n> **VOID**: %d run(s) void: %s. Why a run is void: machine busy (over %.0f%% of the machine's cores busy, with anything), host slow (the host-speed probe over %.0f%% slower through every attempt), sender late (a request sent over %v after its arrival time), overload (no configuration kept up with that load and seed). Overloaded runs are left out of the tables and aims; the others are counted, and their latency differences may be the machine's, not the configurations'. Every run's own figures are in the Runs table.\n",
			len(r.Void), strings.Join(r.Void, "; "), 100*SaturationShare, 100*(host.SlowLimit-1), senderLagLimit)
	} else {
		fmt.Fprintf(w, "\n**Valid**: no run was void: the machine stayed below %.0f%% of its cores busy, the host at speed and the sender on time in every run (see the Runs and CPU tables).\n", 100*SaturationShare)
	}
	if warn := r.Budget.Warning(r.TimeScale); warn != "" {
		fmt.Fprintf(w, "\n> **Machine budget**, judged before the runs: %s.\n", warn)
	}
	if r.HostRef > 0 {
		fmt.Fprintf(w, "\n**Host speed**: a probe timed fixed work on a free core every %v (%.0f µs before the first run; host.Probe); a run during which it was over %.0f%% slower was repeated up to %d times and its attempt on the fastest host kept, a choice that reads the probe only (the CPU table lists every attempt).\n",
			host.ProbePeriod, r.HostRef, 100*(host.SlowLimit-1), host.Retries)
	}
	var slow []string
	for _, run := range r.Runs {
		if run.HostSlow() {
			slow = append(slow, fmt.Sprintf("%.0f%% seed %d %s", 100*run.Summary.Load, run.Seed, run.Summary.Setup))
		}
	}
	if len(slow) > 0 {
		// Kept after every attempt (Run.HostAttempts) or the repeat budget ran out.
		fmt.Fprintf(w, "\n> **Host slow** through every attempt, kept and counted: %s.\n", strings.Join(slow, "; "))
	}
	if len(r.Degraded) > 0 {
		fmt.Fprintf(w, "\n> **Degraded routing** in %d run(s), counted in the tables: %s. A run whose requests name no worker was routed by Envoy's fail-open path, not by the configuration; one that leaves a GPU idle at these loads did not schedule the whole fleet. Read those configurations' figures with that.\n",
			len(r.Degraded), strings.Join(r.Degraded, "; "))
	}
	if len(r.Overload) > 0 {
		fmt.Fprintf(w, "\n> **Overload**, left out of the tables and aims: %s. No configuration kept up with that seed's requests at its offered rate (each left measured requests unfinished after the grace, failed 1%% or more, or had a median TTFT over %.0f ms).\n", strings.Join(r.Overload, "; "), r.Capacity.BoundMs)
	}
	r.fleetSection(w)
	r.capacitySection(w)
	if c := r.Ceilings; c != nil {
		fmt.Fprintf(w, "\n## Prefix-cache ceilings\n\nHit rates in prompt tokens, as gpusim counts them. The whole trace with an unbounded cache: **%.1f%%**. Per seed, over its run's requests: an unbounded cache %s; the fleet's real KV capacity, every request sent to the GPU holding most of its prefix, ignoring load (the issue's definition): %s; one LRU cache as large as the whole fleet's KV (a placement that never duplicates a block nor leaves a cache idle): %s. The greedy replay is no upper bound: piling every request that shares a popular prefix onto one GPU thrashes its cache while the others hold little. The aim is judged against the higher of the two.\n",
			100*c.Trace, seedPercents(r.Seeds, c.Unbounded), seedPercents(r.Seeds, c.Fleet), seedPercents(r.Seeds, c.Pooled))
	}
	for _, load := range r.Loads {
		var st []stats.Stats
		for _, s := range r.Stats {
			if s.Load == load && len(s.Seeds) > 0 {
				st = append(st, s)
			}
		}
		fmt.Fprintf(w, "\n## %.0f%% of capacity\n\n", 100*load)
		if len(st) == 0 {
			fmt.Fprintln(w, "No configuration has figures at this load: every seed was overloaded (see the Runs table for each run's own figures).")
			continue
		}
		statsTables(w, st)
	}
	if !slices.ContainsFunc(r.Aims, func(a Aim) bool { return a.Verdict != NotJudged }) {
		fmt.Fprintf(w, "\n## Aims\n\nNot judged: the default strategy (%s) or the setups the aims compare it with have no figures at the loads they are judged at.\n", DefaultSetup)
	} else {
		fmt.Fprintf(w, "\n## Aims\n\nThe default strategy (%s) with no caps configured. Judged by the interval named in \"judged by\": met when all of it is on the target's side, missed when all of it is on the other, not settled otherwise; not judged when a setup the aim needs has no figures at its load. Peers are the emulations of other schedulers.\n\n", DefaultSetup)
		fmt.Fprintln(w, "| aim | load | value [interval] | target | verdict | judged by | values |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, a := range r.Aims {
			value := FmtEst(a.Ratio, "")
			if a.Verdict == NotJudged {
				value = "-"
			}
			fmt.Fprintf(w, "| %s | %.0f%% | %s | %s | **%s** | %s | %s |\n", a.Name, 100*a.Load, value, a.Target, a.Verdict, a.Judges, a.Detail)
		}
	}
	r.runsTable(w)
	r.cpuTable(w)
	fmt.Fprintf(w, "\n## Plots\n\n")
	for _, p := range plots {
		if why := r.PlotNotes[p]; why != "" {
			fmt.Fprintf(w, "%s: %s.\n\n", p, why)
		}
		fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	fmt.Fprintf(w, "## Notes\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

func (r *Report) fleetSection(w io.Writer) {
	fmt.Fprintf(w, "\n## Fleet\n\nOne `gpusim --fleet` process; every GPU serves model `%s`, with the fleet-file keys %v. The same fleet in every configuration and seed. A router setup gives every worker no max_concurrency unless its name says caps=: caps=batch-limit gives each the engine's batch limit (max_num_seqs), caps=slo-sized the SLO-sized cap below (caps=xF: times F).\n\n", loadgen.Model, r.FleetKeys)
	fmt.Fprintln(w, "| GPU | profile | alone: saturation req/s | engine batch limit | SLO-sized cap | sized at | requests held there |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, g := range r.Fleet {
		fmt.Fprintf(w, "| %s | %s | %.2f | %d | %d | %.0f%% | %s |\n", g.ID, g.Profile, g.SaturationRate, g.BatchLimit, g.Cap, 100*g.CapLoad, g.CapHeld)
	}
	fmt.Fprintf(w, "\nSLO-sized cap rule (gpusim alone, virtual time, one fixed sample of the trace, seed %d, whatever the seeds compared): each GPU is sized at %.0f%% of its saturation rate, or at a lower share (in steps of %.0f points, down to %.0f%%) where fewer than %.0f%% of its requests would keep their p99 inter-token gap within %v (\"sized at\"; no bound when it is 0); its cap is the 99th percentile, weighted by time, of the requests it holds there when it was sized at %.0f%%, room for bursts, or their mean (Little's law) when the SLO lowered its load or the run asked for means (\"requests held there\"). An operator cannot size caps this way: it replays the trace on each GPU's profile.\n",
		SizingSeed, 100*CapLoad, 100*CapLoadStep, 100*CapLoadMin, 100*CapGoodShare, r.CapITL, 100*CapLoad)
}

func (r *Report) capacitySection(w io.Writer) {
	c := r.Capacity
	if c.Setup == EstimateSetup {
		fmt.Fprintf(w, "\n## Capacity\n\nEach seed's capacity is its fleet estimate: the sum of every GPU's saturation rate alone on the seed's requests (the highest rate keeping the median TTFT ≤ 2 s, gpusim in virtual time), what a perfect balancer would sustain. It is deterministic, so repeated comparisons offer the same rates; `--probe-capacity` measures it through real runs instead. %s.\n", seedRates(r.Seeds, r.SeedCapacity))
		return
	}
	first := uint64(0)
	if len(r.Seeds) > 0 {
		first = r.Seeds[0]
	}
	fmt.Fprintf(w, "\n## Capacity\n\n**%.2f req/s**, measured with %s on seed %d. ", c.Rate, c.Setup, first)
	if len(c.Probes) > 0 {
		fmt.Fprintf(w, "A rate (req/s of GPU time) is sustainable when an open-loop run of %d requests at that rate keeps the median TTFT of its measured requests ≤ %.0f ms with under 1%% errors; the capacity is the highest sustainable rate found (search from 85%% of the fleet estimate, 15%% steps, then bisection to 5%%).\n\n", c.Requests, c.BoundMs)
		fmt.Fprintln(w, "| probe rate req/s | median TTFT ms | sustainable | machine saturated |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, p := range c.Probes {
			fmt.Fprintf(w, "| %.2f | %.0f | %s | %s |\n", p.Rate, p.TTFTP50, YesNo(p.Sustainable), YesNo(p.Saturated))
		}
	}
	fmt.Fprintf(w, "\nEach other seed's capacity is this one times the ratio of the seeds' fleet estimates (the sum of every GPU's saturation rate alone on the seed's requests, gpusim in virtual time): %s.\n", seedRates(r.Seeds, r.SeedCapacity))
}

// statsTables writes one load's pooled figures: latencies, then
// predictability, goodput, errors and hit rate.
func statsTables(w io.Writer, st []stats.Stats) {
	fmt.Fprintln(w, "| setup | TTFT p50 | TTFT p90 | TTFT p99 | E2E p50 | E2E p90 | E2E p99 | ITL p50 | ITL p90 | ITL p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range st {
		fmt.Fprintf(w, "| %s |", s.Setup)
		for _, e := range [][3]stats.Estimate{s.TTFT, s.E2E, s.ITL} {
			for _, x := range e {
				fmt.Fprintf(w, " %s |", MsCell(x))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nms of GPU time over every seed's measured requests, [95% interval]. ITL: every inter-token gap of every request, pooled.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| setup | tok/s p5 | tok/s p50 | p5 / p50 | tok/s CV | good (both SLOs) | errors | completed req/s | prefix hit rate |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	minErr := 1.0
	for _, s := range st {
		minErr = min(minErr, s.Errors.Value)
	}
	for _, s := range st {
		mark := ""
		if s.Errors.Lo > minErr+0.001 {
			mark = " (wins by rejecting?)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s%s | %.2f | %s |\n", s.Setup, numCell(s.TPS[0], 1), numCell(s.TPS[1], 1), numCell(s.TPSRatio, 3), numCell(s.TPSCV, 3),
			pctCell(s.Good), pctCell(s.Errors), mark, s.Throughput, hitCell(s.HitRate))
	}
	fmt.Fprintln(w, "\ntok/s: each request's decode rate after its first token; p5 / p50 is the predictability figure (1 is perfectly steady). good: share of measured requests within both SLOs. completed req/s: mean over seeds. prefix hit rate: gpusim's counters over each run, mean [min, max] over seeds. A setup whose errors exceed the fewest by more than its interval is marked: it may win on latency by rejecting work.")
}

// MsCell renders a milliseconds estimate as a table cell: "v [lo, hi]".
func MsCell(e stats.Estimate) string { return fmt.Sprintf("%.0f [%.0f, %.0f]", e.Value, e.Lo, e.Hi) }

func pctCell(e stats.Estimate) string {
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*e.Value, 100*e.Lo, 100*e.Hi)
}

func hitCell(e stats.Estimate) string {
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*e.Value, 100*e.Lo, 100*e.Hi)
}

func numCell(e stats.Estimate, prec int) string {
	return fmt.Sprintf("%.*f [%.*f, %.*f]", prec, e.Value, prec, e.Lo, prec, e.Hi)
}

func joinUints(xs []uint64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(parts, ", ")
}

func seedPercents(seeds []uint64, m map[uint64]float64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprintf("seed %d %.1f%%", s, 100*m[s])
	}
	return strings.Join(parts, ", ")
}

func seedRates(seeds []uint64, m map[uint64]float64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprintf("seed %d %.2f req/s", s, m[s])
	}
	return strings.Join(parts, ", ")
}

// runsTable writes every run's own figures, void ones marked with why.
func (r *Report) runsTable(w io.Writer) {
	fmt.Fprintf(w, "\n## Runs\n\nEvery run's own figures over its measured requests (ms of GPU time; a figure marked ≥ fell on a request cut at the grace, so it is a lower bound), and why it is void, if it is.\n\n")
	fmt.Fprintln(w, "| run | offered req/s | TTFT p50 | TTFT p99 | E2E p99 | good | errors | unfinished | prefix hit rate | sender lag ms | void |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, run := range r.Runs {
		s := run.Summary
		cell := func(name string, v float64) string {
			if slices.Contains(s.LowerBounds, name) {
				return fmt.Sprintf("≥ %.0f", v)
			}
			return fmt.Sprintf("%.0f", v)
		}
		void := "-"
		if len(run.Void) > 0 {
			void = "**VOID**: " + strings.Join(run.Void, ", ")
		}
		fmt.Fprintf(w, "| %s | %.2f | %s | %s | %s | %.1f%% | %d | %d | %.1f%% | %.0f | %s |\n", RunLabel(run), s.Rate,
			cell("ttft_p50_ms", s.TTFTP50), cell("ttft_p99_ms", s.TTFTP99), cell("e2e_p99_ms", s.E2EP99), 100*s.GoodFraction, s.Errors, s.Unfinished, 100*run.HitRate, run.SenderLagMs, void)
	}
}

// cpuTable writes every run's CPU per process and the machine's load.
func (r *Report) cpuTable(w io.Writer) {
	var names []string
	for _, run := range r.Runs {
		for _, u := range run.CPU {
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "\n## CPU\n\nCores used during each run (utime+stime from /proc/<pid>/stat over the run's wall time), and the whole machine's busy cores (/proc/stat, every process, ours or not), and the host-speed probe's time during the run over its time before the first run (1.00: as fast).\n\n")
	fmt.Fprintf(w, "| run | %s | ours | machine | saturated | host slowdown |\n|---|", strings.Join(names, " | "))
	fmt.Fprint(w, strings.Repeat("---|", len(names)+4), "\n")
	rows := append([]*Run(nil), r.Runs...)
	for _, p := range r.Capacity.Probes {
		if p.Run != nil {
			rows = append(rows, p.Run)
		}
	}
	for _, run := range rows {
		label := fmt.Sprintf("%.0f%% seed %d %s", 100*run.Summary.Load, run.Seed, run.Summary.Setup)
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
		fmt.Fprintf(w, " %.2f | %.2f / %d | %s | %s |\n", run.Cores, run.MachineCores, run.MachineCPUs, YesNo(run.Saturated), hostCell(run))
	}
}

// YesNo renders b as a table cell.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// blockRange is the shortest and longest bootstrap block over stats.
func blockRange(stats []stats.Stats) (lo, hi int) {
	for _, st := range stats {
		for _, b := range st.Blocks {
			if lo == 0 || b < lo {
				lo = b
			}
			hi = max(hi, b)
		}
	}
	return lo, hi
}

// hostCell is a run's host slowdown, with every attempt's when it was
// repeated.
func hostCell(run *Run) string {
	if run.HostSlowdown == 0 {
		return "-"
	}
	if len(run.HostAttempts) < 2 {
		return fmt.Sprintf("%.2f", run.HostSlowdown)
	}
	parts := make([]string, len(run.HostAttempts))
	for i, a := range run.HostAttempts {
		parts[i] = fmt.Sprintf("%.2f", a)
	}
	return fmt.Sprintf("%.2f (attempts %s)", run.HostSlowdown, strings.Join(parts, ", "))
}
