// Command llm-chaos runs the chaos suite (`make chaos`): for each scenario
// a fresh local stack (Envoy, Redis, three router replicas, gpusim workers)
// under steady load, one fault, and a report of the requests sent, failed
// and lost and the recovery time. It exits 1 when a scenario fails its
// checks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/llm-router/llm-router/test/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "llm-chaos:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llm-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "bin", "directory holding the llm-router and gpusim binaries")
	out := fs.String("out", "", "write results.json and results.md into this directory")
	only := fs.String("scenarios", "", "comma-separated scenarios to run (default: all)")
	steady := fs.Duration("steady", 3*time.Second, "load time after each step of a scenario")
	replicas := fs.Int("replicas", 3, "router replicas")
	discovery := fs.String("discovery", "static", "envoy.discovery: static, or xds (worker clusters over ADS, as on Kubernetes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	o := chaos.RunOptions{
		Options: chaos.Options{BinDir: *bin, Replicas: *replicas, Discovery: *discovery}, Steady: *steady,
		Logf: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) },
	}
	results, err := chaos.Run(ctx, o, names...)
	if err != nil {
		return err
	}
	command := "llm-chaos " + strings.Join(args, " ")
	fmt.Fprint(stdout, chaos.Markdown(strings.TrimSpace(command), results))
	if *out != "" {
		if err := chaos.WriteReport(*out, "make chaos", results); err != nil {
			return err
		}
	}
	for _, r := range results {
		if !r.Pass {
			return fmt.Errorf("scenario %s failed", r.Scenario)
		}
	}
	return nil
}
