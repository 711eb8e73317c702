package app

import (
	"context"

	"github.com/llm-router/llm-router/internal/config"
)

// Run serves the router cfg describes until ctx ends: `llm-router serve`.
// The benchmark's `llm-bench serve` calls it too, in a binary that also
// registers the emulations of other schedulers, so every router the
// benchmark measures runs this one code path.
func Run(ctx context.Context, cfg config.Config) error {
	log, err := NewLogger(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	r, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return r.Serve(ctx)
}
