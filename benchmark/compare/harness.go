package compare

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
)

// HarnessOptions configure the two closed-loop harnesses: sequential vs
// concurrent, and the concurrency sweep. Both send the
// workload's requests in closed loops (each client sends its next request
// when the previous one ends), to URL or, when URL is empty, to a stack
// they start: the benchmark fleet behind Envoy and the router.
type HarnessOptions struct {
	URL    string // an OpenAI-compatible gateway; empty: start a stack
	APIKey string
	BinDir string
	Fleet  string
	Setup  fleet.Setup
	// TimeScale slows the started fleet down; times are reported divided
	// by it (GPU time). With URL set it is ignored.
	TimeScale    float64
	Workload     loadgen.WorkloadOptions
	Seed         uint64
	Requests     int
	Concurrency  int   // the concurrent mode's clients
	Concurrences []int // the sweep's steps
	ResultsDir   string
	Command      string
	Progress     io.Writer
	Log          io.Writer
}

// HarnessRow is one closed-loop batch: N requests at one concurrency.
type HarnessRow struct {
	Mode        string         `json:"mode"`
	Concurrency int            `json:"concurrency"`
	Requests    int            `json:"requests"`
	OK          int            `json:"ok"`
	ErrorRate   float64        `json:"error_rate"`
	Seconds     float64        `json:"seconds"`
	Throughput  float64        `json:"requests_per_second"`
	TokensPerS  float64        `json:"output_tokens_per_second"`
	LatencyP50  float64        `json:"latency_p50_ms"`
	LatencyP95  float64        `json:"latency_p95_ms"`
	LatencyP99  float64        `json:"latency_p99_ms"`
	TTFTP50     float64        `json:"ttft_p50_ms"`
	TTFTP95     float64        `json:"ttft_p95_ms"`
	MeanTPS     float64        `json:"tokens_per_second_per_request"`
	PerNode     map[string]int `json:"per_node"`
}

// HarnessReport is what a harness measured.
type HarnessReport struct {
	Kind      string       `json:"kind"`
	Command   string       `json:"command"`
	Machine   string       `json:"machine"`
	Started   time.Time    `json:"started"`
	Target    string       `json:"target"`
	TimeScale float64      `json:"time_scale"`
	Rows      []HarnessRow `json:"rows"`
	// Speedup is the concurrent throughput over the sequential one
	// (sequential harness only).
	Speedup float64 `json:"speedup,omitempty"`
}

// Sequential sends o.Requests requests one at a time, then the same
// requests from o.Concurrency clients, and compares throughput and
// latency.
func Sequential(ctx context.Context, o HarnessOptions) (*HarnessReport, error) {
	return harness(ctx, o, "sequential", []int{1, o.Concurrency})
}

// Sweep sends o.Requests requests at each concurrency of o.Concurrences:
// throughput levels off once the clients exceed what the fleet (or the
// router's caps) let run at once.
func Sweep(ctx context.Context, o HarnessOptions) (*HarnessReport, error) {
	return harness(ctx, o, "sweep", o.Concurrences)
}

func harness(ctx context.Context, o HarnessOptions, kind string, concs []int) (*HarnessReport, error) {
	w, err := loadgen.LoadWorkload(o.Workload)
	if err != nil {
		return nil, err
	}
	jobs := w.Jobs(o.Requests, 1, o.Seed)
	url, scale := o.URL, 1.0
	rep := &HarnessReport{Kind: kind, Command: o.Command, Machine: host.Machine(), Started: time.Now(), Target: o.URL}
	if url == "" {
		scale = o.TimeScale
		var stop func()
		url, stop, err = harnessStack(ctx, o, w)
		if err != nil {
			return nil, err
		}
		defer stop()
		rep.Target = fmt.Sprintf("%s on %s (started)", o.Setup.Name, o.Fleet)
	}
	rep.TimeScale = scale
	for _, conc := range concs {
		c := loadgen.NewClient(url, conc, o.APIKey)
		prog := loadgen.NewProgress(o.Progress, fmt.Sprintf("%s, concurrency %d", kind, conc), len(jobs))
		start := time.Now()
		rs := loadgen.RunClosed(ctx, c, len(jobs), conc, func(i int) loadgen.Request {
			prog.Add(1)
			return loadgen.Request{Model: loadgen.Model, MaxTokens: jobs[i].Output, PromptTokens: jobs[i].Prompt, Stream: true}
		})
		elapsed := time.Since(start).Seconds() / scale
		prog.Finish()
		c.Close()
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		rs = loadgen.ScaleResults(rs, scale)
		row := harnessRow(rs, elapsed)
		row.Mode, row.Concurrency = "concurrent", conc
		if conc == 1 {
			row.Mode = "sequential"
		}
		if kind == "sweep" {
			row.Mode = "sweep"
		}
		rep.Rows = append(rep.Rows, row)
		logf(o.Log, "%-10s concurrency %3d: %6.2f req/s, %7.0f tok/s, latency p50 %7.0f p99 %7.0f ms, TTFT p50 %6.0f ms, errors %.1f%%",
			row.Mode, conc, row.Throughput, row.TokensPerS, row.LatencyP50, row.LatencyP99, row.TTFTP50, 100*row.ErrorRate)
	}
	if kind == "sequential" && len(rep.Rows) == 2 && rep.Rows[0].Throughput > 0 {
		rep.Speedup = rep.Rows[1].Throughput / rep.Rows[0].Throughput
	}
	if o.ResultsDir != "" {
		if err := writeHarness(o.ResultsDir, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// harnessRow summarises one closed-loop batch that took elapsed seconds.
func harnessRow(rs []loadgen.Result, elapsed float64) HarnessRow {
	row := HarnessRow{Requests: len(rs), Seconds: elapsed, PerNode: map[string]int{}}
	var lat, ttft []time.Duration
	var tps []float64
	tokens := 0
	for _, r := range rs {
		if !r.OK() {
			continue
		}
		row.OK++
		tokens += r.Tokens
		lat = append(lat, r.Latency)
		ttft = append(ttft, r.TTFT)
		if v := r.TokensPerSecond(); v > 0 {
			tps = append(tps, v)
		}
		if r.Node != "" {
			row.PerNode[r.Node]++
		}
	}
	if row.Requests > 0 {
		row.ErrorRate = float64(row.Requests-row.OK) / float64(row.Requests)
	}
	if elapsed > 0 {
		row.Throughput = float64(row.OK) / elapsed
		row.TokensPerS = float64(tokens) / elapsed
	}
	row.LatencyP50, row.LatencyP95, row.LatencyP99 = stats.Ms(stats.Percentile(lat, 50)), stats.Ms(stats.Percentile(lat, 95)), stats.Ms(stats.Percentile(lat, 99))
	row.TTFTP50, row.TTFTP95 = stats.Ms(stats.Percentile(ttft, 50)), stats.Ms(stats.Percentile(ttft, 95))
	row.MeanTPS, _ = stats.MeanCV(tps)
	return row
}

// harnessStack starts the benchmark fleet and o.Setup in front of it.
func harnessStack(ctx context.Context, o HarnessOptions, w *loadgen.Workload) (url string, stop func(), err error) {
	gpus, err := fleet.Parse(o.Fleet)
	if err != nil {
		return "", nil, err
	}
	if err := SizeFleet(gpus, simRequests(w, w.Jobs(2000, 1, report.SizingSeed)), nil, DefaultCapRule()); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "llmr-harness-")
	if err != nil {
		return "", nil, err
	}
	e, err := fleet.NewEnv(o.BinDir, dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	sim, err := fleet.Start(ctx, o.BinDir, dir, gpus, o.TimeScale, nil)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	rs, err := e.Start(ctx, o.Setup, fleet.Workers(gpus, o.Setup), fleet.RouterOptions{Mutate: func(c *config.Config) { benchRouterConfig(o.Setup, c, o.TimeScale) }})
	if err != nil {
		sim.Stop(3 * time.Second)
		os.RemoveAll(dir)
		return "", nil, err
	}
	return rs.URL, func() {
		rs.Stop()
		sim.Stop(3 * time.Second)
		os.RemoveAll(dir)
	}, nil
}

// writeHarness writes <kind>.json and <kind>.csv into a run folder and
// publishes them to latest/.
func writeHarness(results string, rep *HarnessReport) error {
	dir, err := record.Folder(results, rep.Kind, rep.Started)
	if err != nil {
		return err
	}
	if err := record.WriteJSON(filepath.Join(dir, rep.Kind+".json"), rep); err != nil {
		return err
	}
	err = record.WriteFile(filepath.Join(dir, rep.Kind+".csv"), func(w io.Writer) error {
		fmt.Fprintln(w, "mode,concurrency,requests,ok,error_rate,seconds,requests_per_second,output_tokens_per_second,latency_p50_ms,latency_p95_ms,latency_p99_ms,ttft_p50_ms,ttft_p95_ms,tokens_per_second_per_request")
		for _, r := range rep.Rows {
			fmt.Fprintf(w, "%s,%d,%d,%d,%.4f,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f\n", r.Mode, r.Concurrency, r.Requests, r.OK, r.ErrorRate,
				r.Seconds, r.Throughput, r.TokensPerS, r.LatencyP50, r.LatencyP95, r.LatencyP99, r.TTFTP50, r.TTFTP95, r.MeanTPS)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return record.Publish(results, dir, []string{rep.Kind + ".json", rep.Kind + ".csv"})
}

// Print writes the harness's table.
func (r *HarnessReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\n%s against %s on %s (times in GPU time, scale %g)\n\n", r.Kind, r.Target, r.Machine, r.TimeScale)
	fmt.Fprintln(w, "| mode | concurrency | requests | req/s | output tok/s | latency p50 ms | p95 | p99 | TTFT p50 ms | p95 | tok/s per request | errors | per node |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f%% | %s |\n", row.Mode, row.Concurrency, row.Requests,
			row.Throughput, row.TokensPerS, row.LatencyP50, row.LatencyP95, row.LatencyP99, row.TTFTP50, row.TTFTP95, row.MeanTPS, 100*row.ErrorRate, nodeList(row.PerNode))
	}
	if r.Speedup > 0 {
		fmt.Fprintf(w, "\nconcurrent / sequential throughput: %.2f×\n", r.Speedup)
	}
}

func nodeList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, " ")
}
