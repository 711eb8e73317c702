package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/herd"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
)

func parseHerdFlags(args []string, stderr io.Writer) (herd.Options, error) {
	fs := flag.NewFlagSet("herd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := herd.Options{Hold: 300 * time.Millisecond}
	short := fs.Bool("short", false, "the short version: scored and least_loaded only, 10 bursts each")
	// Every strategy but the simulator's own emulations, which need what
	// only the simulator feeds them.
	all := slices.DeleteFunc(config.Strategies(), func(s string) bool { return slices.Contains(emulate.SimulatorOnly(), s) })
	strategies := fs.String("strategies", strings.Join(all, ","), "router strategies")
	replicas := fs.String("replicas", "1,3", "router replica counts (sharing one redis-server)")
	baselines := fs.String("baselines", "LEAST_REQUEST,ROUND_ROBIN", "Envoy policies measured for reference")
	fs.StringVar(&o.BinDir, "bin", "bin", "directory holding llm-router, llm-bench and gpusim")
	fs.IntVar(&o.Workers, "workers", 6, "idle GPUs, and requests per burst (the fleet size)")
	fs.IntVar(&o.Bursts, "bursts", 50, "bursts per configuration")
	fs.DurationVar(&o.Hold, "hold", o.Hold, "how long each request holds its GPU")
	fs.StringVar(&o.ResultsDir, "results", "benchmark/results", "results folder; empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *short {
		if !set["strategies"] {
			*strategies = "scored,least_loaded"
		}
		if !set["bursts"] {
			o.Bursts = 10
		}
		if !set["baselines"] {
			*baselines = "LEAST_REQUEST"
		}
	}
	for _, s := range strings.Split(*strategies, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Strategies = append(o.Strategies, s)
		}
	}
	for _, s := range strings.Split(*baselines, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Baselines = append(o.Baselines, s)
		}
	}
	for _, s := range strings.Split(*replicas, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("--replicas: bad count %q", s)
		}
		o.Replicas = append(o.Replicas, n)
	}
	if o.Workers < 2 || o.Bursts < 1 {
		return o, fmt.Errorf("need at least 2 workers and 1 burst")
	}
	return o, nil
}

// herdCommand is `llm-bench herd`; named apart from the package it runs.
func herdCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseHerdFlags(args, stderr)
	if err != nil {
		return err
	}
	o.Command = "llm-bench herd " + strings.Join(args, " ")
	o.Progress, o.Log = stderr, stderr
	rep, err := herd.Run(ctx, o)
	if rep != nil {
		rep.Markdown(stdout)
	}
	return err
}
