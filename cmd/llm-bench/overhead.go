package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/llm-router/llm-router/benchmark/overhead"
)

// overheadCommand is `llm-bench overhead`, open-loop (default) or closed-loop;
// named apart from the package it runs.
func overheadCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "open", "open: fixed rates (added latency, highest sustained rate); closed: concurrent clients")
	short := fs.Bool("short", false, "open mode, short: 2 s steps, 3 rounds, 5 doubling steps, admission off only")
	bin := fs.String("bin", "bin", "directory holding llm-router and gpusim")
	results := fs.String("results", "benchmark/results", "results folder; empty: none")
	maxTokens := fs.Int("max-tokens", 8, "max_tokens of each request")
	// Open loop.
	step := fs.Duration("step", 5*time.Second, "open: how long each rate is held")
	rounds := fs.Int("rounds", 5, "times every configuration is measured at each point (closed: times the configurations alternate)")
	maxSteps := fs.Int("max-steps", 6, "open: doubling steps of the sustained-rate search (0: no search)")
	ablate := fs.Bool("ablate", false, "open: also measure the router behind Envoy configs with one part taken out (no json_to_metadata, no Lua, no response-headers phase): what each costs")
	maxP99 := fs.Duration("max-p99", 100*time.Millisecond, "open: p99 latency bound of a sustained rate")
	admission := fs.Bool("admission", true, "open: also measure the router with admission on (queue and API keys)")
	// Closed loop.
	requests := fs.Int("requests", 2000, "closed: requests per configuration")
	concurrency := fs.Int("concurrency", 16, "closed: concurrent clients")
	promptBytes := fs.Int("prompt-bytes", 200, "closed: size of each prompt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *mode {
	case "closed":
		o := overhead.ClosedOptions{
			BinDir: *bin, Requests: *requests, Concurrency: *concurrency, Rounds: *rounds,
			MaxTokens: *maxTokens, PromptBytes: *promptBytes, Out: stderr, ResultsDir: *results,
		}
		if o.Rounds < 1 || o.Concurrency < 1 || o.Requests < o.Rounds {
			return fmt.Errorf("need rounds >= 1, concurrency >= 1, requests >= rounds")
		}
		rep, err := overhead.Closed(ctx, o)
		if err != nil {
			return err
		}
		rep.Print(stdout)
		return nil
	case "open":
	default:
		return fmt.Errorf("--mode %q: want open or closed", *mode)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *short {
		if !set["step"] {
			*step = 2 * time.Second
		}
		if !set["max-steps"] {
			*maxSteps = 5
		}
		if !set["rounds"] {
			*rounds = 3
		}
		if !set["admission"] {
			*admission = false
		}
	}
	o := overhead.OpenOptions{
		BinDir: *bin, Step: *step, Rounds: *rounds, MaxSteps: *maxSteps, MaxP99: *maxP99, Admission: *admission, Ablate: *ablate,
		MaxTokens: *maxTokens, ResultsDir: *results, Progress: stderr, Log: stderr,
		Command: "llm-bench overhead " + strings.Join(args, " "),
		Points:  []overhead.RatePoint{{Rate: 500, Bytes: 1 << 10}, {Rate: 100, Bytes: 256 << 10}},
		Sustain: []overhead.RatePoint{{Rate: 250, Bytes: 1 << 10}, {Rate: 50, Bytes: 256 << 10}},
	}
	if o.Step <= 0 || o.MaxSteps < 0 || o.Rounds < 1 {
		return fmt.Errorf("need --step > 0, --rounds >= 1 and --max-steps >= 0")
	}
	rep, err := overhead.Open(ctx, o)
	if rep != nil {
		rep.Markdown(stdout)
	}
	return err
}

// noopExtProc serves the overhead benchmark's floor: an ext_proc server
// that answers every phase at once and routes every request to --cluster.
func noopExtProc(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("noop-extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9002", "gRPC listen address")
	cluster := fs.String("cluster", "", "x-llm-cluster value of every request")
	window := fs.Int("window", 0, "gRPC stream and connection flow-control windows in bytes (0: grpc-go's defaults, dynamic)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cluster == "" {
		return fmt.Errorf("--cluster is required")
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	var opts []grpc.ServerOption
	if *window > 0 {
		w := int32(min(*window, 1<<30))
		opts = append(opts, grpc.InitialWindowSize(w), grpc.InitialConnWindowSize(w))
	}
	return overhead.ServeNoopExtProc(ctx, lis, *cluster, opts...)
}
