package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/llm-router/llm-router/benchmark/compare"
	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// harnessFlags parses what the sequential and sweep harnesses share.
func harnessFlags(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (compare.HarnessOptions, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := compare.HarnessOptions{
		BinDir: "bin", Fleet: fleet.Default, TimeScale: 1, Seed: 1,
		Workload: loadgen.WorkloadOptions{TracePath: "benchmark/traces/azure-conv-2023.csv", Kind: loadgen.KindTrace, LongShare: 0.25},
	}
	setup := fs.String("setup", "scored", "configuration started when --url is empty: an Envoy policy or a router strategy")
	fs.StringVar(&o.URL, "url", "", "send to this OpenAI-compatible gateway (e.g. http://127.0.0.1:8080) instead of starting a stack")
	fs.StringVar(&o.APIKey, "api-key", "", "bearer key sent with every request")
	fs.StringVar(&o.BinDir, "bin", o.BinDir, "directory holding llm-router, llm-bench and gpusim")
	fs.StringVar(&o.Fleet, "fleet", o.Fleet, "simulated GPUs started when --url is empty, profile:count,...")
	fs.Float64Var(&o.TimeScale, "time-scale", o.TimeScale, "run the started fleet this many times slower; times stay in GPU time")
	fs.StringVar(&o.Workload.TracePath, "trace", o.Workload.TracePath, "trace CSV the request lengths come from (synthetic when absent)")
	fs.StringVar(&o.Workload.Kind, "workload", o.Workload.Kind, "trace or extreme (10- and 2,000-token outputs)")
	fs.IntVar(&o.Requests, "requests", 60, "requests per mode or step")
	fs.StringVar(&o.ResultsDir, "results", "benchmark/results", "results folder; empty: none")
	seed := fs.Uint64("seed", o.Seed, "workload seed")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Seed = *seed
	ss, err := fleet.ParseSetups(*setup)
	if err != nil || len(ss) != 1 {
		return o, fmt.Errorf("--setup %q: want one configuration", *setup)
	}
	o.Setup = ss[0]
	if o.Requests < 1 || o.TimeScale <= 0 {
		return o, fmt.Errorf("need --requests >= 1 and --time-scale > 0")
	}
	o.Command = "llm-bench " + name + " " + strings.Join(args, " ")
	o.Progress, o.Log = stderr, stderr
	return o, nil
}

func sequential(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var conc int
	o, err := harnessFlags("sequential", args, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&conc, "concurrency", 12, "clients of the concurrent mode")
	})
	if err != nil {
		return err
	}
	if conc < 1 {
		return fmt.Errorf("--concurrency must be >= 1")
	}
	o.Concurrency = conc
	rep, err := compare.Sequential(ctx, o)
	if rep != nil {
		rep.Print(stdout)
	}
	return err
}

func sweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var concs string
	o, err := harnessFlags("sweep", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&concs, "concurrencies", "1,2,4,8,16,32", "client concurrency of each step")
	})
	if err != nil {
		return err
	}
	for _, c := range strings.Split(concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("--concurrencies: bad value %q", c)
		}
		o.Concurrences = append(o.Concurrences, n)
	}
	rep, err := compare.Sweep(ctx, o)
	if rep != nil {
		rep.Print(stdout)
	}
	return err
}
