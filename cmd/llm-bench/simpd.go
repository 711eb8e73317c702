package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/sim"
)

// parsePDFlags reads `llm-bench sim pd`'s flags into a study.
func parsePDFlags(args []string, stderr io.Writer) (sim.PDStudy, simOutputs, error) {
	s := sim.PDStudy{Study: sim.DefaultStudy(), LinkGbps: 200}
	s.Strategies = []string{"predicted"}
	var out simOutputs
	fs := flag.NewFlagSet("sim pd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gpus := fs.String("gpus", "a100-llama3-8b:8", "the fleet: profile:count (equal GPU count for every split)")
	splits := fs.String("splits", "0,6,4", "prefill GPUs of each configuration, comma-separated (0: aggregated)")
	thresholds := fs.String("thresholds", "0,4096,8192", "the decider's thresholds (uncached prompt tokens) for every split > 0")
	fs.Float64Var(&s.LinkGbps, "link-gbps", s.LinkGbps, "every GPU's KV link in Gbit/s")
	strategy := fs.String("strategy", "predicted", "the router's strategy")
	fs.IntVar(&s.Replicas[0], "replicas", 1, "router replicas")
	qps := fs.String("qps", "2", "offered rates in requests/s, comma-separated (Poisson arrivals)")
	seeds := fs.String("seeds", "1,2,3,4,5", "seeds, comma-separated")
	fs.StringVar(&s.Workload.Kind, "workload", sim.KindSummarization, "summarization, trace or shared_prefix")
	fs.StringVar(&s.Workload.Trace, "trace", "", "trace file for --workload trace: Azure CSV or Mooncake .jsonl")
	fs.StringVar(&s.Workload.Arrivals, "arrivals", sim.ArrivalsPoisson, "poisson, or trace: the trace's own arrival times rescaled to each rate")
	fs.IntVar(&s.Workload.Requests, "requests", 300, "requests per run (0: the workload's default)")
	fs.StringVar(&s.Workload.MaxTokens, "max-tokens", "", "max_tokens clients send: oracle or bound (default: oracle for summarization and shared_prefix, bound for traces)")
	fs.IntVar(&s.Engine.MaxNumSeqs, "max-num-seqs", s.Engine.MaxNumSeqs, "engine: max sequences in a batch")
	fs.IntVar(&s.Engine.MaxBatchedTokens, "max-batched-tokens", 2048, "engine: token budget of one step (chunked prefill)")
	fs.Float64Var(&s.Engine.GPUMemUtil, "gpu-mem-util", s.Engine.GPUMemUtil, "engine: fraction of GPU memory used")
	fs.DurationVar(&s.SLO.TTFT, "slo-ttft", 5*time.Second, "goodput: TTFT bound")
	fs.DurationVar(&s.SLO.TPOT, "slo-itl", 100*time.Millisecond, "goodput: bound on a request's own p99 gap between tokens")
	fs.StringVar(&out.json, "json", "", "write the report as JSON to this file")
	fs.StringVar(&out.markdown, "md", "", "write the Markdown report to this file (it always goes to stdout)")
	fs.BoolVar(&out.quiet, "quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return s, out, err
	}
	if fs.NArg() > 0 {
		return s, out, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	var err error
	if s.GPUs, err = parseGPUClasses(*gpus); err != nil {
		errs = append(errs, fmt.Errorf("--gpus: %w", err))
	}
	s.Strategies = []string{*strategy}
	if s.Splits, err = parseList(*splits, strconv.Atoi); err != nil {
		errs = append(errs, fmt.Errorf("--splits: %w", err))
	}
	if s.Thresholds, err = parseList(*thresholds, strconv.Atoi); err != nil {
		errs = append(errs, fmt.Errorf("--thresholds: %w", err))
	}
	if s.QPS, err = parseList(*qps, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }); err != nil {
		errs = append(errs, fmt.Errorf("--qps: %w", err))
	}
	if s.Seeds, err = parseList(*seeds, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) }); err != nil {
		errs = append(errs, fmt.Errorf("--seeds: %w", err))
	}
	return s, out, errors.Join(errs...)
}

// simPDCommand is `llm-bench sim pd`: aggregated against disaggregated
// splits of one fleet on the virtual-time simulator, with the aims'
// verdicts; its Markdown report on stdout.
func simPDCommand(args []string, stdout, stderr io.Writer) error {
	s, out, err := parsePDFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := stderr
	if out.quiet {
		progress = nil
	}
	rep, err := sim.ExecutePD(s, progress)
	if err != nil {
		return err
	}
	rep.Command = strings.TrimSpace("llm-bench sim pd " + strings.Join(args, " "))
	if out.json != "" {
		if err := writeFile(out.json, rep.WriteJSON); err != nil {
			return err
		}
	}
	if out.markdown != "" {
		if err := writeFile(out.markdown, func(w io.Writer) error { rep.WriteMarkdown(w); return nil }); err != nil {
			return err
		}
	}
	rep.WriteMarkdown(stdout)
	return nil
}
