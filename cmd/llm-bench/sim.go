package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/llm-router/llm-router/benchmark/sim"
)

// parseSimFlags reads `llm-bench sim`'s flags into a study; Validate is
// left to sim.Execute, which names the field at fault.
func parseSimFlags(args []string, stderr io.Writer) (sim.Study, simOutputs, error) {
	s := sim.DefaultStudy()
	var out simOutputs
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gpus := fs.String("gpus", "a100-llama3-8b:16", "the fleet: profile:count[:max_concurrency],... (max_concurrency 0 or absent: uncapped)")
	replicas := fs.String("replicas", "1", "router replica counts, comma-separated")
	strategies := fs.String("strategies", "round_robin", "strategies, comma-separated (the product's and the emulations of scoring/emulate)")
	qps := fs.String("qps", "4", "offered rates in requests/s, comma-separated (Poisson arrivals); with --ladder, none unless given")
	ladder := fs.String("ladder", "", "rates min:max:steps, evenly spaced (added to --qps when both are given)")
	seeds := fs.String("seeds", "1", "seeds, comma-separated")
	fs.StringVar(&s.Workload.Kind, "workload", sim.KindSharedPrefix, "shared_prefix, trace or lora")
	fs.StringVar(&s.Workload.Trace, "trace", "", "trace file for --workload trace: Azure CSV or Mooncake .jsonl")
	fs.StringVar(&s.Workload.Arrivals, "arrivals", sim.ArrivalsPoisson, "poisson, or trace: the trace's own arrival times rescaled to each rate")
	fs.IntVar(&s.Workload.Requests, "requests", 0, "requests per run (0: every shared_prefix prompt once, or 1000 trace rows)")
	fs.StringVar(&s.Workload.MaxTokens, "max-tokens", "", "max_tokens clients send: oracle or bound (default: oracle for shared_prefix, bound for traces)")
	sp := &s.Workload.SharedPrefix
	fs.IntVar(&sp.NumGroups, "num-groups", sp.NumGroups, "shared_prefix: groups sharing a system prompt")
	fs.IntVar(&sp.NumPromptsPerGroup, "num-prompts-per-group", sp.NumPromptsPerGroup, "shared_prefix: prompts per group")
	fs.IntVar(&sp.SystemPromptLen, "system-prompt-len", sp.SystemPromptLen, "shared_prefix: system prompt tokens")
	fs.IntVar(&sp.QuestionLen, "question-len", sp.QuestionLen, "shared_prefix: question tokens")
	fs.IntVar(&sp.OutputLen, "output-len", sp.OutputLen, "shared_prefix: output tokens")
	s.Workload.LoRA = sim.LoRAPreset()
	lw := &s.Workload.LoRA
	loraPreset := fs.String("lora-preset", "fixed", "lora: fixed popularity, or shifting (the ranking rotates by 10 ranks every 30 s; --lora-shift-* override it)")
	fs.IntVar(&lw.Adapters, "lora-adapters", lw.Adapters, "lora: adapters of the base model")
	fs.Float64Var(&lw.ZipfS, "lora-zipf-s", lw.ZipfS, "lora: Zipf exponent of adapter popularity (0: uniform)")
	fs.DurationVar(&lw.ShiftEvery, "lora-shift-every", 0, "lora: rotate the popularity ranking this often (0: fixed)")
	fs.IntVar(&lw.ShiftBy, "lora-shift-by", 0, "lora: ranks each rotation moves by (0: a fifth of the adapters)")
	fs.IntVar(&lw.PromptLen, "lora-prompt-len", lw.PromptLen, "lora: mean prompt tokens (±50 %)")
	fs.IntVar(&lw.OutputLen, "lora-output-len", lw.OutputLen, "lora: mean output tokens (±50 %)")
	fs.IntVar(&s.Engine.MaxLoras, "max-loras", 4, "engine: LoRA slots per GPU, with --workload lora")
	fs.Float64Var(&s.Engine.LoRALoadMs, "lora-load-ms", s.Engine.LoRALoadMs, "engine: ms an adapter takes to enter a slot")
	fs.IntVar(&s.Engine.MaxNumSeqs, "max-num-seqs", s.Engine.MaxNumSeqs, "engine: max sequences in a batch")
	fs.IntVar(&s.Engine.MaxBatchedTokens, "max-batched-tokens", s.Engine.MaxBatchedTokens, "engine: token budget of one step (chunked prefill)")
	fs.Float64Var(&s.Engine.GPUMemUtil, "gpu-mem-util", s.Engine.GPUMemUtil, "engine: fraction of GPU memory used")
	fs.DurationVar(&s.Router.RefreshInterval, "refresh", s.Router.RefreshInterval, "each replica's snapshot refresh interval")
	fs.DurationVar(&s.Router.ScrapePeriod, "scrape", 0, "telemetry scrape period (0: the product's, 50ms for the emulations with queue and KV scorers)")
	fs.DurationVar(&s.Router.TelemetryStale, "stale", s.Router.TelemetryStale, "telemetry older than this is unknown")
	fs.DurationVar(&s.SLO.TTFT, "slo-ttft", s.SLO.TTFT, "goodput: TTFT bound")
	fs.DurationVar(&s.SLO.TPOT, "slo-tpot", s.SLO.TPOT, "goodput: time-per-output-token bound")
	fs.StringVar(&out.json, "json", "", "write the report as JSON to this file")
	fs.StringVar(&out.markdown, "md", "", "write the Markdown report to this file (it always goes to stdout)")
	fs.BoolVar(&out.quiet, "quiet", false, "no progress lines on stderr")
	fs.IntVar(&out.jobs, "jobs", 0, "runs at once (0: GOMAXPROCS, the cores); the report does not depend on it")
	fs.StringVar(&out.cpuProfile, "cpuprofile", "", "write the study's CPU profile (pprof) to this file")
	fs.StringVar(&out.memProfile, "memprofile", "", "write the study's allocation profile (pprof) to this file")
	if err := fs.Parse(args); err != nil {
		return s, out, err
	}
	if fs.NArg() > 0 {
		return s, out, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	switch *loraPreset {
	case "fixed":
	case "shifting":
		p := sim.LoRAShiftingPreset()
		if !set["lora-shift-every"] {
			lw.ShiftEvery = p.ShiftEvery
		}
		if !set["lora-shift-by"] {
			lw.ShiftBy = p.ShiftBy
		}
	default:
		errs = append(errs, fmt.Errorf("--lora-preset: %q: want fixed or shifting", *loraPreset))
	}
	if s.Workload.Kind != sim.KindLoRA {
		// The LoRA flags describe a lora workload only.
		s.Workload.LoRA, s.Engine.MaxLoras = sim.LoRAWorkload{}, 0
	}
	var err error
	if s.GPUs, err = parseGPUClasses(*gpus); err != nil {
		errs = append(errs, fmt.Errorf("--gpus: %w", err))
	}
	if s.Replicas, err = parseList(*replicas, strconv.Atoi); err != nil {
		errs = append(errs, fmt.Errorf("--replicas: %w", err))
	}
	s.Strategies, _ = parseList(*strategies, func(v string) (string, error) { return v, nil })
	if s.QPS, err = parseList(*qps, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }); err != nil {
		errs = append(errs, fmt.Errorf("--qps: %w", err))
	}
	if *ladder != "" {
		parts := strings.Split(*ladder, ":")
		var l sim.Ladder
		var e1, e2, e3 error
		if len(parts) == 3 {
			l.Min, e1 = strconv.ParseFloat(parts[0], 64)
			l.Max, e2 = strconv.ParseFloat(parts[1], 64)
			l.Steps, e3 = strconv.Atoi(parts[2])
		}
		if len(parts) != 3 || errors.Join(e1, e2, e3) != nil {
			errs = append(errs, fmt.Errorf("--ladder: %q: want min:max:steps", *ladder))
		}
		s.Ladder = &l
		if !set["qps"] {
			s.QPS = nil
		}
	}
	if s.Seeds, err = parseList(*seeds, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) }); err != nil {
		errs = append(errs, fmt.Errorf("--seeds: %w", err))
	}
	return s, out, errors.Join(errs...)
}

type simOutputs struct {
	json, markdown, cpuProfile, memProfile string
	quiet                                  bool
	jobs                                   int
}

// parseGPUClasses reads profile:count[:max_concurrency],...
func parseGPUClasses(v string) ([]sim.GPUClass, error) {
	var out []sim.GPUClass
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("%q: want profile:count[:max_concurrency]", item)
		}
		g := sim.GPUClass{Profile: parts[0]}
		var err error
		if g.Count, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("%q: bad count", item)
		}
		if len(parts) == 3 {
			if g.MaxConcurrency, err = strconv.Atoi(parts[2]); err != nil {
				return nil, fmt.Errorf("%q: bad max_concurrency", item)
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// parseList splits a comma-separated list, skipping empty items.
func parseList[T any](v string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		x, err := parse(item)
		if err != nil {
			return nil, fmt.Errorf("bad item %q", item)
		}
		out = append(out, x)
	}
	return out, nil
}

// simGCPercent is the simulator's garbage-collection target (GOGC), and
// simMemoryLimit its soft memory limit (GOMEMLIMIT).
const (
	simGCPercent   = 400
	simMemoryLimit = 4 << 30
)

// simCommand is `llm-bench sim`: a study on the virtual-time fleet
// simulator, its Markdown report on stdout; `llm-bench sim validate`
// sets the simulator against compare results.
func simCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if os.Getenv("GOGC") == "" {
		// A run allocates snapshots at a high rate over a large live
		// heap (the engines' caches, the store's indexes): collecting at
		// 4× the live heap instead of 2× saves about a third of the CPU
		// for about twice the memory, within a soft limit that makes the
		// collector work harder rather than pass it. GOGC and GOMEMLIMIT
		// set in the environment win.
		debug.SetGCPercent(simGCPercent)
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(simMemoryLimit)
		}
	}
	if len(args) > 0 && args[0] == "validate" {
		return simValidateCommand(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "pd" {
		return simPDCommand(args[1:], stdout, stderr)
	}
	s, out, err := parseSimFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := stderr
	if out.quiet {
		progress = nil
	}
	if out.cpuProfile != "" {
		f, err := os.Create(out.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := sim.Execute(s, out.jobs, progress)
	if err != nil {
		return err
	}
	if out.memProfile != "" {
		if err := writeFile(out.memProfile, func(w io.Writer) error { return pprof.Lookup("allocs").WriteTo(w, 0) }); err != nil {
			return err
		}
	}
	rep.Command = strings.TrimSpace("llm-bench sim " + strings.Join(args, " "))
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

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
