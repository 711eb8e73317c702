package redis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/state/storetest"
	"github.com/llm-router/llm-router/test/stack"
)

// The three topologies a deployment can give the router (redis.url or one
// addr; addrs + master_name; several addrs), each started once for the
// package's tests.
var (
	redisAddr string
	sentinels *stack.SentinelGroup
	cluster   *stack.Cluster
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
		ctx := context.Background()
		// No skipping: `make test` installs redis-server, redis-sentinel
		// and redis-cli.
		srv, err := stack.StartRedis(ctx, dir, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "state tests:", err)
			return 1
		}
		defer srv.Stop(2 * time.Second)
		redisAddr = srv.Addr
		// Sentinels take seconds to discover each other: everything starts
		// at once.
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(func() { sentinels, errs[0] = stack.StartSentinelGroup(ctx, filepath.Join(dir, "sentinel"), "llmr") })
		wg.Go(func() { cluster, errs[1] = stack.StartCluster(ctx, filepath.Join(dir, "cluster"), 3, 0) })
		wg.Wait()
		if sentinels != nil {
			defer sentinels.Stop()
		}
		if cluster != nil {
			defer cluster.Stop()
		}
		if err := errors.Join(errs[:]...); err != nil {
			fmt.Fprintln(os.Stderr, "state tests:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// topology is how a replica's client reaches Redis, and the pools its
// store shards keys by (nil: one hash tag).
type topology struct {
	name  string
	opts  func() *redis.UniversalOptions
	pools redisstore.Pools
}

func topologies() []topology {
	return []topology{
		{"Single", func() *redis.UniversalOptions { return &redis.UniversalOptions{Addrs: []string{redisAddr}} }, nil},
		{"Sentinel", func() *redis.UniversalOptions {
			return &redis.UniversalOptions{Addrs: sentinels.SentinelAddrs, MasterName: sentinels.MasterName}
		}, nil},
		{"Cluster", func() *redis.UniversalOptions {
			return &redis.UniversalOptions{Addrs: cluster.Addrs, IsClusterMode: true}
		}, nil},
		// The suite's model in a pool of its own: its keys under
		// {prefix:chat}, found by peers that never registered a worker.
		{"ClusterPooled", func() *redis.UniversalOptions {
			return &redis.UniversalOptions{Addrs: cluster.Addrs, IsClusterMode: true}
		}, redisstore.Pools{"chat": {"m"}, "code": {"coder"}}},
	}
}

// TestRedisConformance runs the store suite against a single
// redis-server, a Sentinel group and a 3-master Cluster; each "replica"
// has a client (connection pool) of its own.
func TestRedisConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	for _, topo := range topologies() {
		t.Run(topo.name, func(t *testing.T) {
			connect := func(t *testing.T) redis.UniversalClient {
				o := topo.opts()
				o.PoolSize = 32
				c := redis.NewUniversalClient(o)
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			limits := map[string]state.Limits{}
			open := func(t *testing.T, prefix string) state.Store {
				s, err := redisstore.NewPooled(connect(t), prefix, limits[prefix], topo.pools)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			storetest.Run(t,
				func(t *testing.T, l state.Limits) state.Store {
					prefix := fmt.Sprintf("test%d", prefixSeq.Add(1))
					limits[prefix] = l
					return open(t, prefix)
				},
				func(t *testing.T, s state.Store) state.Store {
					p := s.(*redisstore.Store).Prefix()
					return open(t, p[1:len(p)-2])
				})
		})
	}
}
