package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// TestKilledReplicaLeaksNothing: a router process holding 10 claims is
// killed with SIGKILL; its claims stop counting within the lease bound.
func TestKilledReplicaLeaksNothing(t *testing.T) {
	rd := startRedis(t)
	const lease = 2 * time.Second
	addrs := stack.MustFreeAddrs(2)
	cfg := config.Default()
	cfg.ShutdownDelay = 0
	cfg.Strategy = scoring.Scored // written against scored, like the harness
	cfg.ExtProcListen, cfg.AdminListen = addrs[0], addrs[1]
	cfg.Redis.URL = "redis://" + rd.Addr + "/0"
	cfg.Redis.KeyPrefix = fmt.Sprintf("kill%d", prefixSeq.Add(1))
	cfg.ClaimLease = config.Duration(lease)
	cfg.Workers = fakeWorkers(4, 8, "m")
	cfg.LogLevel = "warn"
	path := filepath.Join(t.TempDir(), "router.yaml")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	proc, err := stack.StartRouter(ctx, bins["llm-router"], path, cfg.AdminListen, cfg.ExtProcListen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(time.Second) })

	client := redis.NewClient(&redis.Options{Addr: rd.Addr})
	defer client.Close()
	store := redisstore.New(client, cfg.Redis.KeyPrefix, state.Limits{})
	total := func() int {
		snap, err := store.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range snap.Workers {
			n += w.InFlight
		}
		return n
	}

	conn := dialExtProc(t, cfg.ExtProcListen)
	for i := 0; i < 10; i++ {
		r, err := conn.start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, status, err := r.decide(chatBody("m")); err != nil || status != 200 {
			t.Fatalf("decide: %v %d", err, status)
		}
		defer r.cancel()
	}
	if n := total(); n != 10 {
		t.Fatalf("%d claims counted, want 10", n)
	}
	// Survive a few renewals first: live claims must not lapse. Holding
	// them two leases long is what this checks, not a wait for readiness.
	time.Sleep(2 * lease)
	if n := total(); n != 10 {
		t.Fatalf("live, renewed claims lapsed: %d counted, want 10", n)
	}

	killed := time.Now()
	proc.Kill()
	err = stack.WaitFor(ctx, 3*lease, func() error {
		if n := total(); n != 0 {
			return fmt.Errorf("%d still counted", n)
		}
		return nil
	})
	took := time.Since(killed)
	if err != nil {
		t.Fatalf("claims of the killed replica still count after %v: %v", took, err)
	}
	t.Logf("lease %v: the killed replica's 10 claims stopped counting %v after SIGKILL", lease, took.Round(time.Millisecond))
	if took > lease+time.Second {
		t.Fatalf("expiry took %v, beyond the lease bound %v", took, lease)
	}
}
