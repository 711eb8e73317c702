package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark"
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

func parseCompareFlags(args []string, stderr io.Writer) (benchmark.CompareOptions, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchmark.DefaultCompareOptions()
	short := fs.Bool("short", false, "the short version: 80% load only, 500 requests a run, 1000 a capacity probe, 4 probes, 15 s grace")
	loads := fs.String("loads", "0.6,0.8,0.95", "loads as shares of the measured capacity")
	setups := fs.String("setups", "ROUND_ROBIN,LEAST_REQUEST,round_robin,least_loaded,latency_based,inference_aware,scored,queue_kv_max_score",
		"configurations: Envoy policies (upper case) and router strategies")
	capSetup := fs.String("capacity-setup", "LEAST_REQUEST", "configuration whose capacity defines the loads")
	fs.StringVar(&o.BinDir, "bin", o.BinDir, "directory holding llm-router and gpusim")
	fs.StringVar(&o.Fleet, "fleet", o.Fleet, "simulated GPUs, profile:count,...")
	fs.StringVar(&o.Workload.TracePath, "trace", o.Workload.TracePath, "request trace CSV (arrived_at,num_prefill_tokens,num_decode_tokens); synthetic lengths when absent")
	fs.StringVar(&o.Workload.Kind, "workload", o.Workload.Kind, "trace (the trace's lengths) or extreme (10- and 2,000-token outputs)")
	fs.StringVar(&o.Workload.Arrivals, "arrivals", o.Workload.Arrivals, "poisson, or trace (its own arrival times, rescaled)")
	fs.Float64Var(&o.Workload.LongShare, "long-share", o.Workload.LongShare, "extreme workload: share of 2,000-token jobs")
	fs.Float64Var(&o.TimeScale, "time-scale", o.TimeScale, "run the GPUs this many times slower (gpusim --slowdown); results stay in GPU time")
	fs.IntVar(&o.Requests, "requests", o.Requests, "requests per run")
	fs.Float64Var(&o.Warmup, "warmup", o.Warmup, "share of each run's requests before the measured ones")
	fs.Float64Var(&o.Tail, "tail", o.Tail, "share of each run's requests after the measured ones")
	seed := fs.Uint64("seed", o.Seed, "seed of the workload (the same for every configuration)")
	fs.DurationVar(&o.SLO.TTFT, "slo-ttft", o.SLO.TTFT, "goodput: TTFT bound")
	fs.DurationVar(&o.SLO.ITL, "slo-itl", o.SLO.ITL, "goodput: bound of each request's p99 inter-token gap")
	fs.Float64Var(&o.Capacity, "capacity", 0, "use this capacity (req/s) instead of measuring it")
	fs.DurationVar(&o.CapacityTTFT, "capacity-ttft", o.CapacityTTFT, "capacity: the median TTFT a sustainable rate stays under")
	fs.IntVar(&o.ProbeRequests, "probe-requests", o.ProbeRequests, "requests per capacity probe")
	fs.IntVar(&o.MaxProbes, "max-probes", o.MaxProbes, "capacity probes at most")
	fs.DurationVar(&o.Grace, "grace", o.Grace, "longest wait (GPU time) for a run's measured requests after its last arrival")
	fs.StringVar(&o.ResultsDir, "results", o.ResultsDir, "results folder (a run folder and latest/ are written in it); empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *short {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["requests"] {
			o.Requests = 500
		}
		if !set["probe-requests"] {
			o.ProbeRequests = 1000
		}
		if !set["max-probes"] {
			o.MaxProbes = 4
		}
		if !set["grace"] {
			o.Grace = 15 * time.Second
		}
		if !set["loads"] {
			*loads = "0.8"
		}
	}
	o.Seed = *seed
	var err error
	if o.Loads, err = parseFloats(*loads); err != nil {
		return o, fmt.Errorf("--loads: %w", err)
	}
	if o.Setups, err = benchmark.ParseSetups(*setups); err != nil {
		return o, err
	}
	cs, err := benchmark.ParseSetups(*capSetup)
	if err != nil || len(cs) != 1 {
		return o, fmt.Errorf("--capacity-setup %q: want one configuration", *capSetup)
	}
	o.CapacitySetup = cs[0]
	return o, nil
}

func compare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCompareFlags(args, stderr)
	if err != nil {
		return err
	}
	o.Command = "llm-bench compare " + strings.Join(args, " ")
	o.Progress, o.Log = stderr, stderr
	rep, err := benchmark.Compare(ctx, o)
	if err != nil {
		return err
	}
	rep.Markdown(stdout)
	return nil
}
