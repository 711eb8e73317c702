package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llm-router/llm-router/internal/cli"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// adminCommand parses an admin command's flags and positional arguments.
func adminCommand(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*cli.Client, *adminFlags, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a adminFlags
	a.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parseWithPositional(fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := a.client()
	return c, &a, pos, err
}

func workers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var model string
	c, a, pos, err := adminCommand("workers", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&model, "model", "", "only workers serving this model")
	})
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return errors.New("usage: llm-router workers [--model M] [--admin URL] [-o json]")
	}
	ws, err := c.Workers(ctx, model)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return cli.PrintProto(stdout, &pb.ListWorkersResponse{Workers: ws})
	}
	cli.PrintWorkers(stdout, ws)
	return nil
}

func stats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, a, _, err := adminCommand("stats", args, stderr, nil)
	if err != nil {
		return err
	}
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return cli.PrintProto(stdout, s)
	}
	cli.PrintStats(stdout, s)
	return nil
}

func drain(ctx context.Context, args []string, stdout, stderr io.Writer, on bool) error {
	var wait bool
	var timeout time.Duration
	name := "undrain"
	if on {
		name = "drain"
	}
	c, a, pos, err := adminCommand(name, args, stderr, func(fs *flag.FlagSet) {
		if on {
			fs.BoolVar(&wait, "wait", false, "return once the worker has no request in flight")
			fs.DurationVar(&timeout, "timeout", 5*time.Minute, "with --wait, fail after this long")
		}
	})
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: llm-router %s WORKER_ID [--admin URL] [--token T]%s", name, map[bool]string{true: " [--wait] [--timeout 5m]"}[on])
	}
	w, err := c.SetDrain(ctx, pos[0], on)
	if err != nil {
		return err
	}
	if wait {
		if err := c.WaitDrained(ctx, pos[0], timeout, stderr); err != nil {
			return err
		}
		if w, err = c.Worker(ctx, pos[0]); err != nil {
			return err
		}
	}
	if a.output == "json" {
		return cli.PrintProto(stdout, w)
	}
	state := "undrained: taking requests"
	if on {
		state = fmt.Sprintf("draining: no new requests, %d in flight", w.GetInFlight())
	}
	fmt.Fprintf(stdout, "%s %s\n", pos[0], state)
	return nil
}

func register(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		spec      pb.WorkerSpec
		models    string
		cap       int
		lease     time.Duration
		keepAlive bool
	)
	c, a, pos, err := adminCommand("register", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&spec.Id, "id", "", "worker id (also its Envoy cluster name)")
		fs.StringVar(&spec.Address, "address", "", "host:port of the worker's OpenAI-compatible server")
		fs.StringVar(&models, "model", "", "model(s) it serves, comma-separated")
		fs.IntVar(&cap, "max-concurrency", 4, "requests it runs at once")
		fs.StringVar(&spec.Zone, "zone", "", "zone")
		fs.StringVar(&spec.Region, "region", "", "region")
		fs.StringVar(&spec.MetricsFormat, "metrics-format", "", "vllm, sglang, llamacpp, trtllm or none")
		fs.DurationVar(&lease, "lease", 10*time.Second, "the worker leaves the fleet this long after its last heartbeat")
		fs.BoolVar(&keepAlive, "keep-alive", false, "stay and heartbeat every lease/3 (an agent next to the worker); deregister on SIGTERM")
	})
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("register takes flags only, not %q", strings.Join(pos, " "))
	}
	spec.MaxConcurrency = int32(cap)
	for _, m := range strings.Split(models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			spec.Models = append(spec.Models, m)
		}
	}
	resp, err := c.Register(ctx, &spec, lease)
	if err != nil {
		return err
	}
	if a.output == "json" {
		if err := cli.PrintProto(stdout, resp); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s registered (lease %s, heartbeat every %s)\n", spec.Id, lease, resp.GetHeartbeatInterval().AsDuration())
	}
	if !keepAlive {
		return nil
	}
	every := resp.GetHeartbeatInterval().AsDuration()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Leaving on purpose: deregister now rather than wait out the
			// lease.
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.Deregister(dctx, spec.Id); err != nil {
				return fmt.Errorf("deregister on exit: %w", err)
			}
			fmt.Fprintf(stdout, "%s deregistered\n", spec.Id)
			return nil
		case <-t.C:
			if err := c.Heartbeat(ctx, spec.Id, lease); err != nil && ctx.Err() == nil {
				if errors.Is(err, cli.ErrNotFound) {
					// The lease lapsed (the router could not be reached for
					// too long): join again.
					if _, err := c.Register(ctx, &spec, lease); err != nil {
						fmt.Fprintf(stderr, "re-register %s: %v\n", spec.Id, err)
					}
					continue
				}
				fmt.Fprintf(stderr, "heartbeat %s: %v\n", spec.Id, err)
			}
		}
	}
}

func deregister(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, _, pos, err := adminCommand("deregister", args, stderr, nil)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: llm-router deregister WORKER_ID [--admin URL] [--token T]")
	}
	if err := c.Deregister(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s deregistered\n", pos[0])
	return nil
}
