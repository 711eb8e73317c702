package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/picks"
)

// picksCommand is `llm-bench picks`; named apart from the package it runs.
func picksCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("picks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := picks.Options{Out: stdout, Replicas: []int{1, 3}}
	fs.IntVar(&o.Workers, "workers", 64, "registered workers")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measurement time per replica count (per layout with --pools)")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "concurrent decisions per replica")
	fs.StringVar(&o.ResultsDir, "results", "", "write picks.json (picks_pools.json with --pools) here")
	fs.IntVar(&o.Rounds, "rounds", 0, "alternate a bare claim+release loop (the claim and release scripts only, no scheduler) and the scheduler this many times, and report the ratio (0: the scheduler only)")
	fs.BoolVar(&o.Prefix, "prefix", false, "turn on the prefix and token-load terms; every request sends a 64-block prompt sharing 48 blocks with one of 32 others")
	pools := fs.String("pools", "", "compare key layouts instead: one shard, then these pool counts on a 3-master Redis Cluster, e.g. 1,2,4 (with 3 replicas)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pools == "" {
		_, err := picks.Run(ctx, o)
		return err
	}
	var counts []int
	for _, f := range strings.Split(*pools, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("--pools: want pool counts like 1,2,4, got %q", *pools)
		}
		counts = append(counts, n)
	}
	o.Replicas = []int{3}
	_, err := picks.Pools(ctx, o, counts)
	return err
}

func scriptCost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("script-cost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("workers", "16,64,256,1000", "fleet sizes: workers of the one model, all candidates of every claim")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("--workers: want sizes like 16,64, got %q", *sizes)
		}
		ns = append(ns, n)
	}
	_, err := picks.ScriptCosts(ctx, stdout, ns)
	return err
}
