// Command llm-pd-sidecar is the routing sidecar of prefill/decode
// disaggregation, beside a decode engine: it runs a request's prefill on
// the worker the router names in x-prefiller-host-port, then the decode
// on the local engine with the KV transfer parameters, as llm-d's routing
// sidecar does (package internal/pdsidecar).
//
//	llm-pd-sidecar --listen :8000 --decoder http://127.0.0.1:8200
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/pdsidecar"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "llm-pd-sidecar:", err)
		os.Exit(1)
	}
}

// options are the command line's settings.
type options struct {
	listen string
	cfg    pdsidecar.Config
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("llm-pd-sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8000", "address the sidecar serves on (the address the router routes to)")
	fs.StringVar(&o.cfg.Decoder, "decoder", "http://127.0.0.1:8200", "base URL of the local decode engine")
	fs.DurationVar(&o.cfg.PrefillTimeout, "prefill-timeout", 30*time.Second, "past this the prefill is abandoned and the local engine serves the request")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	o.cfg.Log = log
	sc, err := pdsidecar.New(o.cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "llm-pd-sidecar listening on %s, decoder %s\n", ln.Addr(), o.cfg.Decoder)
	hs := &http.Server{Handler: sc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
