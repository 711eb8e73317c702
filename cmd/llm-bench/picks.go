package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/llm-router/llm-router/benchmark"
)

func picks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("picks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchmark.PicksOptions{Out: stdout, Replicas: []int{1, 3}}
	fs.IntVar(&o.Workers, "workers", 64, "registered workers")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measurement time per replica count")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "concurrent decisions per replica")
	fs.StringVar(&o.ResultsDir, "results", "", "write picks.json here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, err := benchmark.Picks(ctx, o)
	return err
}
