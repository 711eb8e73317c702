package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/llm-router/llm-router/benchmark/compare"
	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
)

// parseFloats reads "0.6,0.8,0.95".
func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseCompareFlags(args []string, stderr io.Writer) (compare.Options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "azure-conv", "the comparison: "+strings.Join(compare.PresetNames(), " or ")+" (its trace, fleet and scales; flags below override them)")
	short := fs.Bool("short", false, "the short version: 60, 80 and 95% load, 500 requests a run (435 measured), 3 seeds, the short list of configurations (the default strategy with and without the SLO-sized caps, scored, Envoy LEAST_REQUEST, every peer emulation), 800 a capacity probe, 4 probes")
	loads := fs.String("loads", "0.6,0.8,0.95", "loads as shares of the measured capacity")
	setups := fs.String("setups", "", "configurations: Envoy policies (upper case) and router strategies, \"strategy xN\" for N replicas, \"strategy caps=none|batch-limit|slo-sized|xF\" for the workers' max_concurrency (default none), \"strategy path=value\" for config keys (default: all, or the short list with --short)")
	capSetup := fs.String("capacity-setup", "LEAST_REQUEST", "configuration whose capacity defines the loads")
	seeds := fs.String("seeds", "1,2,3", "workload seeds; every configuration runs every seed")
	fleetSet := fs.String("fleet-set", "", "gpusim fleet keys for every GPU, key=value,... (e.g. gpu_mem_util=0.5)")
	trace := fs.String("trace", "", "request trace: a CSV (arrived_at,num_prefill_tokens,num_decode_tokens) or a Mooncake .jsonl")
	gpus := fs.String("fleet", "", "simulated GPUs, profile:count,...")
	timeScale := fs.Float64("time-scale", 0, "run the GPUs this many times their profiled durations (gpusim --slowdown); results stay in GPU time")
	tokenScale := fs.Float64("token-scale", 0, "multiply every length of the trace by this (0, 1]")
	o := compare.DefaultOptions()
	fs.StringVar(&o.BinDir, "bin", o.BinDir, "directory holding llm-router, llm-bench and gpusim")
	fs.StringVar(&o.Workload.Kind, "workload", o.Workload.Kind, "trace (the trace's lengths) or extreme (10- and 2,000-token outputs)")
	fs.StringVar(&o.Workload.Arrivals, "arrivals", o.Workload.Arrivals, "poisson, or trace (its own arrival times, rescaled)")
	fs.StringVar(&o.Workload.MaxTokens, "max-tokens", loadgen.MaxTokensBound, "what clients send as max_tokens: bound (absent or 4096, half each) or oracle (the true output length)")
	fs.Float64Var(&o.Workload.LongShare, "long-share", o.Workload.LongShare, "extreme workload: share of 2,000-token jobs")
	fs.IntVar(&o.Requests, "requests", o.Requests, "requests per run")
	fs.Float64Var(&o.Warmup, "warmup", o.Warmup, "share of each run's requests before the measured ones")
	fs.Float64Var(&o.Tail, "tail", o.Tail, "share of each run's requests after the measured ones")
	fs.DurationVar(&o.SLO.TTFT, "slo-ttft", o.SLO.TTFT, "goodput: TTFT bound")
	fs.DurationVar(&o.SLO.ITL, "slo-itl", o.SLO.ITL, "goodput: bound of each request's p99 inter-token gap")
	fs.BoolVar(&o.CapsForThroughput, "caps-for-throughput", false, "size every GPU's cap at 90% of its saturation rate, ignoring --slo-itl")
	fs.BoolVar(&o.CapsAtMean, "caps-at-mean", false, "a cap is the mean number of requests the GPU holds at its sizing load, not the 99th percentile (with --caps-for-throughput: the rule before 2026-12-01)")
	fs.Float64Var(&o.Capacity, "capacity", 0, "use this capacity (req/s) instead of the fleet estimate")
	fs.BoolVar(&o.ProbeCapacity, "probe-capacity", false, "measure the capacity through real runs of --capacity-setup (a search over rates) instead of the virtual-time fleet estimate")
	fs.DurationVar(&o.CapacityTTFT, "capacity-ttft", o.CapacityTTFT, "capacity: the median TTFT a sustainable rate stays under")
	fs.IntVar(&o.ProbeRequests, "probe-requests", o.ProbeRequests, "requests per capacity probe")
	fs.IntVar(&o.MaxProbes, "max-probes", o.MaxProbes, "capacity probes at most")
	fs.DurationVar(&o.Grace, "grace", o.Grace, "longest wait (GPU time) for a run's measured requests after its last arrival")
	fs.StringVar(&o.ResultsDir, "results", o.ResultsDir, "results folder (a run folder and latest/ are written in it); empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := compare.ApplyPreset(&o, *name, *short); err != nil {
		return o, err
	}
	if *short {
		if !set["requests"] {
			o.Requests = shortRequests
		}
		if !set["warmup"] {
			o.Warmup = 0.05
		}
		if !set["tail"] {
			o.Tail = 0.08
		}
		if !set["probe-requests"] {
			o.ProbeRequests = 800
		}
		if !set["max-probes"] {
			o.MaxProbes = 4
		}
		o.Setups = compare.ShortSetups()
	}
	if set["trace"] {
		o.Workload.TracePath = *trace
	}
	if set["fleet"] {
		o.Fleet = *gpus
	}
	if set["time-scale"] {
		o.TimeScale = *timeScale
	}
	if set["token-scale"] {
		o.Workload.TokenScale = *tokenScale
	}
	var err error
	if *fleetSet != "" {
		if o.FleetExtra, err = parseKeyValues(*fleetSet); err != nil {
			return o, fmt.Errorf("--fleet-set: %w", err)
		}
	}
	if o.Seeds, err = parseUints(*seeds); err != nil || len(o.Seeds) == 0 {
		return o, fmt.Errorf("--seeds %q: want a comma-separated list of seeds", *seeds)
	}
	if o.Loads, err = parseFloats(*loads); err != nil {
		return o, fmt.Errorf("--loads: %w", err)
	}
	if *setups != "" {
		if o.Setups, err = fleet.ParseSetups(*setups); err != nil {
			return o, err
		}
	}
	cs, err := fleet.ParseSetups(*capSetup)
	if err != nil || len(cs) != 1 {
		return o, fmt.Errorf("--capacity-setup %q: want one configuration", *capSetup)
	}
	o.CapacitySetup = cs[0]
	return o, nil
}

// shortRequests is a run of the short comparison: 3 loads x 3 seeds x the
// short setups on three presets fit about 25 minutes of two cores.
const shortRequests = 500

// parseUints reads "1,2,3".
func parseUints(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseKeyValues reads "k=v,k=v"; numbers and booleans keep their type.
func parseKeyValues(s string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value", kv)
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		} else if b, err := strconv.ParseBool(v); err == nil {
			out[k] = b
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// compareCommand is `llm-bench compare`; named apart from the package it runs.
func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCompareFlags(args, stderr)
	if err != nil {
		return err
	}
	o.Command = "llm-bench compare " + strings.Join(args, " ")
	o.Progress, o.Log = stderr, stderr
	rep, err := compare.Compare(ctx, o)
	if err != nil && !errors.Is(err, report.ErrVoid) {
		return err
	}
	// A void comparison still prints its whole report, then fails with
	// the cause and the option that fixes it.
	report.WriteMarkdown(stdout, rep)
	return err
}
