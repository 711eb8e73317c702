package storetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// agreeRedis starts a redis-server for a cross-check of the stores (the
// tests that drive both through one random sequence); it stops with t.
func agreeRedis(ctx context.Context, t *testing.T) *redis.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv, err := stack.StartRedis(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(time.Second) })
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// agreePair is a fresh in-memory store and a Redis store under its own
// key prefix (name and seed), both with specs registered: index 0 is
// memory, 1 Redis.
func agreePair(ctx context.Context, t *testing.T, client *redis.Client, name string, seed uint64, specs []state.WorkerSpec) []state.Store {
	t.Helper()
	limits := state.Limits{Lease: time.Minute}
	stores := []state.Store{memory.New(nil, limits), redisstore.New(client, fmt.Sprintf("%s%d", name, seed), limits)}
	for _, s := range stores {
		if err := s.Register(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	return stores
}
