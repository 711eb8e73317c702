// Command llm-bench drives the benchmarks in benchmark/: `overhead` compares
// Envoy straight to a zero-latency worker against Envoy with the router.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llm-router/llm-router/benchmark"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "llm-bench:", err)
		os.Exit(1)
	}
}

const usage = `usage: llm-bench <command> [flags]

commands:
  overhead   Envoy straight to one instant gpusim vs Envoy with llm-router, same requests
  picks      scheduler decisions per second against one real redis-server, 1 and 3 replicas
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "overhead":
		return overhead(ctx, args[1:], stdout, stderr)
	case "picks":
		return picks(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func overhead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchmark.OverheadOptions{Out: stderr}
	fs.StringVar(&o.BinDir, "bin", "bin", "directory holding llm-router and gpusim")
	fs.IntVar(&o.Requests, "requests", 2000, "requests per configuration")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "concurrent clients")
	fs.IntVar(&o.Rounds, "rounds", 4, "times the configurations alternate")
	fs.IntVar(&o.MaxTokens, "max-tokens", 8, "max_tokens of each request")
	fs.IntVar(&o.PromptBytes, "prompt-bytes", 200, "size of each prompt")
	fs.StringVar(&o.ResultsDir, "results", "", "write overhead.json here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := benchmark.Overhead(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	return nil
}

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
