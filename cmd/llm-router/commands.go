package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/llm-router/llm-router/app"
	"github.com/llm-router/llm-router/config"
	"github.com/llm-router/llm-router/envoy"
)

const usage = `usage: llm-router <command> [flags]

commands:
  serve --config FILE          run the ext_proc scheduling sidecar
  envoy-config --config FILE   print the Envoy configuration for FILE
  version                      print the version and the pinned Envoy version
`

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "envoy-config":
		return envoyConfig(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "llm-router (Envoy %s)\n", envoy.Version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// parseConfigFlag parses `--config FILE` for a subcommand.
func parseConfigFlag(name string, args []string, stderr io.Writer) (config.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "router config file (YAML)")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, fmt.Errorf("%s: unexpected arguments %s", name, strings.Join(fs.Args(), " "))
	}
	if *path == "" {
		return config.Config{}, fmt.Errorf("%s: --config FILE is required", name)
	}
	return config.Load(*path, nil)
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseConfigFlag("serve", args, stderr)
	if err != nil {
		return err
	}
	log, err := app.NewLogger(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	r, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return r.Serve(ctx)
}

func envoyConfig(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfigFlag("envoy-config", args, stderr)
	if err != nil {
		return err
	}
	out, err := envoy.Render(cfg)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
