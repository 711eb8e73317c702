package xds

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

// Fleet is where Follow reads the registry: the scheduler's last snapshot.
type Fleet interface {
	Snapshot() state.Snapshot
}

// Follow keeps the clusters served in step with the fleet's registry,
// reading it every interval until ctx ends. base gives everything but the
// workers (ports, timeouts, retries).
func (s *Server) Follow(ctx context.Context, fleet Fleet, base config.Config, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cfg := base
		cfg.Workers = Workers(fleet.Snapshot())
		if err := s.Update(ctx, cfg); err != nil && ctx.Err() == nil {
			s.log.Warn("update xds clusters", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Workers lists a snapshot's workers as the config lists them, the form
// the cluster template renders.
func Workers(snap state.Snapshot) []config.Worker {
	out := make([]config.Worker, 0, len(snap.Workers))
	for _, w := range snap.Workers {
		out = append(out, config.Worker{
			ID: w.Spec.ID, Address: w.Spec.Address, Models: w.Spec.Models, Zone: w.Spec.Zone,
			Region: w.Spec.Region, MaxConcurrency: w.Spec.MaxConcurrency,
		})
	}
	return out
}
