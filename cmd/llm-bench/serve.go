package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/config"

	// The emulations of other schedulers register their strategies here,
	// and only here: llm-router does not link them, so the product
	// accepts only its own strategies. The benchmark runs its routers
	// with an emulation as `llm-bench serve` (benchmark/fleet/setup.go).
	_ "github.com/llm-router/llm-router/scoring/emulate"
)

// serve runs one router replica exactly as `llm-router serve` does
// (app.Run, the same configuration file), in a binary whose registry also
// holds the emulations of other schedulers.
func serve(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "router config file (YAML), as llm-router serve reads it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return errors.New("usage: llm-bench serve --config FILE")
	}
	cfg, err := config.Load(*path, nil)
	if err != nil {
		return err
	}
	return app.Run(ctx, cfg)
}
