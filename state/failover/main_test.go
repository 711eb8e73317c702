package failover_test

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
	"github.com/llm-router/llm-router/state/failover"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/state/storetest"
	"github.com/llm-router/llm-router/test/stack"
)

// A redis-server for the conformance suite, and a Sentinel group and a
// Cluster with replicas that the high-availability tests kill, each
// started once for the package's tests.
var (
	redisAddr      string
	doomedSentinel *stack.SentinelGroup
	doomedCluster  *stack.Cluster
	prefixSeq      atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "llmr-failover-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx := context.Background()
		srv, err := stack.StartRedis(ctx, dir, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "failover tests:", err)
			return 1
		}
		defer srv.Stop(2 * time.Second)
		redisAddr = srv.Addr
		// Sentinels take seconds to discover each other: both start at once.
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(func() {
			doomedSentinel, errs[0] = stack.StartSentinelGroup(ctx, filepath.Join(dir, "doomed-sentinel"), "doomed")
		})
		wg.Go(func() { doomedCluster, errs[1] = stack.StartCluster(ctx, filepath.Join(dir, "doomed-cluster"), 3, 1) })
		wg.Wait()
		if doomedSentinel != nil {
			defer doomedSentinel.Stop()
		}
		if doomedCluster != nil {
			defer doomedCluster.Stop()
		}
		if err := errors.Join(errs[:]...); err != nil {
			fmt.Fprintln(os.Stderr, "failover tests:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// TestFailoverConformance runs the store suite on the failover store over a
// reachable redis-server: while Redis answers, it keeps the contract as the
// Redis store does. Each "replica" has a client of its own.
func TestFailoverConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	open := func(t *testing.T, prefix string, l state.Limits) state.Store {
		c := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 32})
		t.Cleanup(func() { _ = c.Close() })
		return failover.New(redisstore.New(c, prefix, l), nil)
	}
	limits := map[string]state.Limits{}
	storetest.Run(t,
		func(t *testing.T, l state.Limits) state.Store {
			prefix := fmt.Sprintf("conf%d", prefixSeq.Add(1))
			limits[prefix] = l
			return open(t, prefix, l)
		},
		func(t *testing.T, s state.Store) state.Store {
			p := s.(*failover.Store).Primary().Prefix()
			prefix := p[1 : len(p)-2]
			return open(t, prefix, limits[prefix])
		})
}
