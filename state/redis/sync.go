package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// This file holds what the failover store needs to repair Redis after a
// failover lost writes: which server answers, and dropping claims whose
// release was lost.

//go:embed lua/forget.lua
var luaForget string

var scriptForget = script(luaForget)

// Forget drops each given claim if Redis still holds it: the caller
// released it, and the release was lost. It returns how many it dropped.
func (r *Store) Forget(ctx context.Context, ids []string) (int, error) {
	dropped := 0
	// Released ids are no longer placed: every shard is asked.
	for _, sh := range r.shards {
		for rest := ids; len(rest) > 0; {
			batch := rest[:min(len(rest), 1000)]
			rest = rest[len(batch):]
			args := make([]any, len(batch))
			for i, id := range batch {
				args[i] = id
			}
			n, err := r.run(ctx, sh, scriptForget, args...).Int()
			if err != nil {
				return dropped, fmt.Errorf("redis forget: %w", err)
			}
			dropped += n
		}
	}
	return dropped, nil
}

// ServerID names the Redis process that holds the store's keys now (its
// run_id; in a Cluster, that of the master of the keys' slot). It changes
// when Redis restarts, when Sentinel promotes a replica and when a Cluster
// replica takes over the slot: each time writes the old server
// acknowledged may be missing.
func (r *Store) ServerID(ctx context.Context) (string, error) {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return runID(r.client.Info(ctx, "server").Result())
	}
	// With pools, the shards' masters' ids, in shard order.
	ids := make([]string, len(r.shards))
	for i, sh := range r.shards {
		node, err := cc.MasterForKey(ctx, sh.keys[0])
		if err != nil {
			return "", err
		}
		if ids[i], err = runID(node.Info(ctx, "server").Result()); err != nil {
			return "", err
		}
	}
	return strings.Join(ids, ","), nil
}

func runID(info string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", errors.New("redis INFO server has no run_id")
}
