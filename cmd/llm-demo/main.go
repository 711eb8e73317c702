// Command llm-demo runs the quick-start stack (`make demo`): three simulated
// GPUs, the router and Envoy; it sends a few requests, shows which worker
// served each and why, and serves until Ctrl-C.
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

	"github.com/llm-router/llm-router/test/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "llm-demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llm-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "bin", "directory holding the llm-router and gpusim binaries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return demo.Run(ctx, demo.Options{BinDir: *bin, Stdout: stdout})
}
