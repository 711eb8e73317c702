package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/llm-router/llm-router/state"
)

//go:embed lua/limits.lua
var luaLimits string

var scriptLimits = script(luaLimits)

// PutLimits stores learned limits, one round trip per shard.
func (r *Store) PutLimits(ctx context.Context, ls map[string]state.Limit) error {
	groups := map[*shard][]any{}
	for id, l := range ls {
		js, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("redis limits: %w", err)
		}
		sh := r.shardOfWorker(ctx, id)
		groups[sh] = append(groups[sh], "limit", id, l.Value, l.Tokens, string(js))
	}
	for sh, args := range groups {
		if err := r.run(ctx, sh, scriptLimits, args...).Err(); err != nil {
			return fmt.Errorf("redis limits: %w", err)
		}
	}
	return nil
}

// ForgetPrefixes empties a worker's prefix index.
func (r *Store) ForgetPrefixes(ctx context.Context, worker string) error {
	err := scriptError(r.run(ctx, r.shardOfWorker(ctx, worker), scriptLimits, "forget", worker).Err())
	if err != nil {
		return fmt.Errorf("redis forget prefixes of %s: %w", worker, err)
	}
	return nil
}

// parseLimits reads the snapshot's worker → limit JSON pairs.
func parseLimits(kvs [][2]string) map[string]state.Limit {
	out := make(map[string]state.Limit, len(kvs))
	for _, kv := range kvs {
		var l state.Limit
		if json.Unmarshal([]byte(kv[1]), &l) == nil {
			out[kv[0]] = l
		}
	}
	return out
}
