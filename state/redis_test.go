package state_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/internal/stack"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/storetest"
)

var (
	redisAddr string
	prefixSeq atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "llmr-redis-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		srv, err := stack.StartRedis(context.Background(), dir, "")
		if err != nil {
			// No skipping: `make test` installs redis-server.
			fmt.Fprintln(os.Stderr, "state tests:", err)
			return 1
		}
		defer srv.Stop(2 * time.Second)
		redisAddr = srv.Addr
		return m.Run()
	}()
	os.Exit(code)
}

func newClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{redisAddr}, PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisConformance runs the store suite against a real redis-server;
// each "replica" has a client (connection pool) of its own.
func TestRedisConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	limits := map[string]state.Limits{}
	storetest.Run(t,
		func(t *testing.T, l state.Limits) storetest.Store {
			prefix := fmt.Sprintf("test%d", prefixSeq.Add(1))
			limits[prefix] = l
			return state.NewRedis(newClient(t), prefix, l)
		},
		func(t *testing.T, s storetest.Store) storetest.Store {
			p := s.(*state.Redis).Prefix()
			prefix := p[1 : len(p)-2]
			return state.NewRedis(newClient(t), prefix, limits[prefix])
		})
}
