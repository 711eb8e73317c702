// Command llm-bench drives the benchmarks in benchmark/:
//
//	compare     every configuration on one simulated fleet, one trace, several seeds and loads, with 95 % intervals
//	agree       whether several compare runs agree (every setup's p90 TTFT intervals overlap)
//	herd        bursts onto an idle fleet: how often two requests land on one GPU while another idles
//	overhead    what Envoy + llm-router add over Envoy alone and over Envoy + a no-op ext_proc, at fixed rates and in a closed loop
//	noop-extproc the no-op ext_proc server the overhead benchmark starts (the floor)
//	serve       a router replica, as llm-router serve, that also accepts the emulations of other schedulers
//	picks       scheduler decisions per second against one real redis-server
//	script-cost Redis server time of a decision, a snapshot and a renewal per fleet size
//	sequential  the same requests one at a time, then concurrently
//	sweep       throughput and latency against client concurrency
//	sim         a fleet of simulated GPUs and router replicas in virtual time: strategies, replicas and rates in seconds
//	fairness    VTC's fairness scenarios through three replicas in virtual time: the fair queue vs FCFS vs llm-d's per-replica round robin
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
  compare     Envoy alone, llm-router's strategies and the peers' emulations on one simulated fleet and trace, 3 seeds, 60/80/95% of the measured capacity, 95% intervals
  agree       compare-NAME.json of several runs: do every setup's p90 TTFT intervals overlap?
  fairness    VTC's fairness scenarios through 3 replicas in virtual time: llm-router's fair queue vs FCFS vs llm-d's per-replica round robin, intervals over seeds
  herd        bursts of N simultaneous requests onto N idle GPUs: collision rate per strategy, atomic claim on/off, 1 and 3 replicas
  overhead    Envoy straight to one instant gpusim vs Envoy with a no-op ext_proc and with llm-router: fixed rates (open loop) or closed loop
  noop-extproc serve the no-op ext_proc server (started by overhead)
  serve       --config FILE: a router replica as llm-router serve runs it, that also accepts the
              emulations of other schedulers (started by compare and herd for those setups)
  picks       scheduler decisions per second against one real redis-server, 1 and 3 replicas
              (--pools 1,2,4: one shard against pools on a 3-master Redis Cluster)
  script-cost Redis server time of a decision, a snapshot and a renewal, per workers of a model
  sequential  the same requests one at a time, then concurrently (throughput and latency)
  sweep       throughput and latency against client concurrency

Run "llm-bench <command> -h" for its flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"compare":      compareCommand,
		"agree":        agree,
		"herd":         herdCommand,
		"overhead":     overheadCommand,
		"noop-extproc": noopExtProc,
		"serve":        serve,
		"picks":        picksCommand,
		"script-cost":  scriptCost,
		"sequential":   sequential,
		"sweep":        sweep,
		"sim":          simCommand,
		"fairness":     fairnessCommand,
	}
	if c, ok := cmds[args[0]]; ok {
		return c(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
