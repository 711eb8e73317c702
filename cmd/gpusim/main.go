// Command gpusim serves simulated GPU inference servers (OpenAI, llama.cpp
// and Prometheus endpoints) for demos, end-to-end tests and benchmarks, and
// validates the calibrated engine against a request trace.
//
//	gpusim --listen 127.0.0.1:8000 --model llama [flags]   serve one GPU
//	gpusim --fleet fleet.yaml                             serve a fleet
//	gpusim validate --profile a100-llama3-8b --trace azure-conv-2023.csv
//
// See package gpusim for the flags, endpoints and fleet file format.
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

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/benchmark/gpusim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpusim:", err)
		os.Exit(1)
	}
}

// run dispatches the subcommand; serving is the default.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "validate":
			return runValidate(args[1:], stdout, stderr)
		case "serve":
			args = args[1:]
		}
	}
	cfgs, err := gpusim.ParseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr)
	defer func() { _ = log.Sync() }()
	return gpusim.Serve(ctx, cfgs, log, func(id, addr string) {
		fmt.Fprintf(stdout, "gpusim %s listening on %s\n", id, addr)
	})
}

func newLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), zap.InfoLevel))
}

// validateFlags are the options of the validate subcommand.
type validateFlags struct {
	cfg      gpusim.Config
	trace    string
	requests int
	opts     gpusim.ValidateOptions
}

func parseValidateFlags(args []string, stderr io.Writer) (validateFlags, error) {
	fs := flag.NewFlagSet("gpusim validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := validateFlags{cfg: gpusim.DefaultConfig(), opts: gpusim.DefaultValidateOptions()}
	v.cfg.Listen, v.cfg.Models = "validate", []string{"model"}
	fs.StringVar(&v.cfg.Profile, "profile", "a100-llama3-8b", "calibrated profile to replay on")
	fs.IntVar(&v.cfg.MaxNumSeqs, "max-num-seqs", v.cfg.MaxNumSeqs, "max sequences in a batch")
	fs.IntVar(&v.cfg.MaxBatchedTokens, "max-batched-tokens", v.cfg.MaxBatchedTokens, "token budget of one step")
	fs.Float64Var(&v.cfg.GPUMemUtil, "gpu-mem-util", v.cfg.GPUMemUtil, "fraction of GPU memory used")
	fs.StringVar(&v.trace, "trace", "", "trace CSV (arrived_at,num_prefill_tokens,num_decode_tokens)")
	fs.IntVar(&v.requests, "requests", 2000, "replay the first N requests of the trace (0 = all)")
	fs.DurationVar(&v.opts.TTFTBound, "ttft-bound", v.opts.TTFTBound, "median TTFT above which a rate is unsustainable")
	fs.Float64Var(&v.opts.Step, "step", v.opts.Step, "rate increment of the scan (req/s)")
	fs.Float64Var(&v.opts.MaxRate, "max-rate", v.opts.MaxRate, "highest rate scanned (req/s)")
	if err := fs.Parse(args); err != nil {
		return v, err
	}
	if v.trace == "" {
		return v, errors.New("validate: --trace is required")
	}
	if v.opts.Step <= 0 || v.opts.MaxRate < v.opts.Step || v.opts.TTFTBound <= 0 {
		return v, errors.New("validate: --step, --max-rate and --ttft-bound must be positive, max-rate >= step")
	}
	return v, v.cfg.Validate()
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	v, err := parseValidateFlags(args, stderr)
	if err != nil {
		return err
	}
	reqs, err := gpusim.LoadTraceFile(v.trace, v.requests)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := gpusim.FindSaturation(v.cfg, reqs, v.opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "profile %s, %d requests, sustainable = median TTFT <= %v\n", v.cfg.Profile, len(reqs), v.opts.TTFTBound)
	fmt.Fprintf(stdout, "%8s %10s %10s %10s %12s %11s %s\n", "rate", "p50 ttft", "p99 ttft", "p50 e2e", "throughput", "preemptions", "sustainable")
	for _, r := range res.Runs {
		fmt.Fprintf(stdout, "%8.3f %10.3f %10.3f %10.3f %12.3f %11d %v\n", r.Rate,
			r.P50TTFT.Seconds(), r.P99TTFT.Seconds(), r.P50E2E.Seconds(), r.Throughput, r.Preemptions, r.Sustainable)
	}
	fmt.Fprintf(stdout, "saturation rate: %.2f req/s (%d replays in %v)\n", res.SaturationRate, len(res.Runs), time.Since(start).Round(time.Millisecond))
	return nil
}
