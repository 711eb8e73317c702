package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// TestRedisOutageUnderLoad kills and restarts a real redis-server under
// steady load through Envoy: no client sees an error, /health says
// degraded meanwhile, and afterwards Redis counts every claim exactly once
// (all back to 0) with the registry and averages restored.
func TestRedisOutageUnderLoad(t *testing.T) {
	rd := startRedis(t)
	prefix := fmt.Sprintf("outage%d", prefixSeq.Add(1))
	e := newEnv(t, threeWorkers("--tokens-per-second", "200", "--ttft-ms", "5"), func(c *config.Config) {
		c.Redis.URL = "redis://" + rd.Addr + "/0"
		c.Redis.KeyPrefix = prefix
		c.Redis.Timeout = config.Duration(200 * time.Millisecond)
		c.ClaimLease = config.Duration(2 * time.Second)
		for i := range c.Workers { // capacity is not what this test is about
			c.Workers[i].MaxConcurrency = 64
		}
	})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()

	var sent, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				model := []string{"model-a", "model-b"}[(g+i)%2]
				body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":` + boolStr(i%2 == 0) + `}`
				req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				b := new(strings.Builder)
				copyLimited(b, resp)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %s", resp.StatusCode, b.String()))
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond) // pacing: a steady load, not a flood
			}
		}(g)
	}

	health := func() string {
		resp, err := http.Get("http://" + e.Cfg.AdminListen + "/health")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var h struct{ Status string }
		_ = json.NewDecoder(resp.Body).Decode(&h)
		return h.Status
	}
	// sentAfter waits until n more requests went out than at its call.
	sentAfter := func(what string, n int64) {
		t.Helper()
		from := sent.Load()
		if err := stack.WaitFor(ctx, 15*time.Second, func() error {
			if got := sent.Load() - from; got < n {
				return fmt.Errorf("%d of %d requests sent", got, n)
			}
			return nil
		}); err != nil {
			t.Fatalf("too little traffic %s to test anything: %v", what, err)
		}
	}
	sentAfter("before the outage", 60)
	if h := health(); h != "ok" {
		t.Fatalf("health before the outage: %s", h)
	}
	rd.Kill()
	killedAt := sent.Load()
	if err := stack.WaitFor(ctx, 5*time.Second, func() error {
		if h := health(); h != "degraded" {
			return fmt.Errorf("health %q", h)
		}
		return nil
	}); err != nil {
		t.Fatalf("degraded mode not shown: %v", err)
	}
	sentAfter("during the outage", 100)
	rd2, err := rd.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd2.Stop(2 * time.Second) })
	restartedAt := sent.Load()
	if err := stack.WaitFor(ctx, 5*time.Second, func() error {
		if h := health(); h != "ok" {
			return fmt.Errorf("health %q", h)
		}
		return nil
	}); err != nil {
		t.Fatalf("not recovered: %v", err)
	}
	sentAfter("after the recovery", 60)
	cancel()
	wg.Wait()
	t.Logf("%d requests, %d failed; %d sent while Redis was down", sent.Load(), failed.Load(), restartedAt-killedAt)
	if failed.Load() != 0 {
		t.Fatalf("client-visible errors: %v", failures[:min(5, len(failures))])
	}

	// Reconciled: the restarted (empty) Redis has the registry back, the
	// averages, and every count at 0 once the load is over.
	client := redis.NewClient(&redis.Options{Addr: rd2.Addr})
	defer client.Close()
	store := redisstore.New(client, prefix, state.Limits{})
	err = stack.WaitFor(context.Background(), 5*time.Second, func() error {
		snap, err := store.Snapshot(context.Background())
		if err != nil {
			return err
		}
		if len(snap.Workers) != 3 {
			return fmt.Errorf("registry has %d workers after recovery", len(snap.Workers))
		}
		for _, w := range snap.Workers {
			if w.InFlight != 0 {
				return fmt.Errorf("%s: %d in flight", w.Spec.ID, w.InFlight)
			}
			if w.Stats.Latency.Samples == 0 {
				return fmt.Errorf("%s: averages not restored", w.Spec.ID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.Router.Scheduler().LiveClaims(); n != 0 {
		t.Fatalf("router holds %d claims", n)
	}
}
