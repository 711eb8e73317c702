package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Restore registers workers with their last known live state (health,
// drain, averages) wherever Redis has none: after Redis lost its data, any
// replica can put back what it last saw.
func (r *Store) Restore(ctx context.Context, ws []state.Worker) error {
	return r.restore(ctx, ws, true)
}

func (r *Store) restore(ctx context.Context, ws []state.Worker, withState bool) error {
	groups := map[*shard][]state.Worker{}
	for _, w := range ws {
		sh, err := r.shardOfModels(w.Spec.Models)
		if err != nil {
			return fmt.Errorf("worker %s: %w", w.Spec.ID, err)
		}
		groups[sh] = append(groups[sh], w)
	}
	for sh, g := range groups {
		if err := r.restoreShard(ctx, sh, g, withState); err != nil {
			return err
		}
		for _, w := range g {
			r.where.learnWorker(w.Spec.ID, sh)
		}
	}
	return nil
}

func (r *Store) restoreShard(ctx context.Context, sh *shard, ws []state.Worker, withState bool) error {
	args := []any{len(ws)}
	for _, w := range ws {
		spec, err := json.Marshal(w.Spec)
		if err != nil {
			return err
		}
		drain := ""
		if w.Draining {
			drain = "1"
		}
		health := w.Health
		if health == "" {
			health = scoring.Healthy
		}
		args = append(args, w.Spec.ID, string(spec), w.Spec.MaxConcurrency, string(health), drain, len(w.Spec.Models))
		for _, m := range w.Spec.Models {
			args = append(args, m)
		}
		var stats []any
		if withState {
			stats = statsFields(w.Stats)
		}
		args = append(args, len(stats)/2)
		args = append(args, stats...)
	}
	return r.run(ctx, sh, scriptRegister, args...).Err()
}

func statsFields(s state.Stats) []any {
	var out []any
	add := func(f string, e state.EMA) {
		if e.Samples == 0 {
			return
		}
		out = append(out, f+"_v", strconv.FormatFloat(e.Value, 'g', -1, 64), f+"_n", e.Samples, f+"_t", e.Updated.UnixMilli())
	}
	add("lat", s.Latency)
	add("ttft", s.TTFT)
	add("tps", s.TokensPerSec)
	if s.Requests > 0 {
		out = append(out, "req", s.Requests, "err", s.Errors)
	}
	return out
}
