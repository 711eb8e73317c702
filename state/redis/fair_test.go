package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// TestPumpForgetsDecayedCounters: a tenant's counter that decayed to
// nothing, with no waiter, is gone after a pump; one still waiting stays.
func TestPumpForgetsDecayedCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()
	s := redisstore.New(client, "fairprune", state.Limits{Lease: time.Minute, FairHalfLife: 10 * time.Millisecond})
	if err := s.Register(ctx, []state.WorkerSpec{{ID: "w0", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	cands := []state.Candidate{{Worker: "w0", Cap: 1, Slope: 1}}
	claim := func(id, tenant string) state.ClaimResult {
		res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands, Queue: &state.QueueSpec{Model: "m", Allow: 10, Replica: "r", Tenant: tenant, Cost: 100}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	claim("once", "seen-once")
	claim("waits", "waiting") // queued behind once
	if _, err := s.Release(ctx, state.Release{ID: "once"}); err != nil {
		t.Fatal(err)
	}
	claim("waits-2", "waiting")        // waiting's first was granted; this one queues
	time.Sleep(300 * time.Millisecond) // 30 half-lives
	if err := s.Pump(ctx); err != nil {
		t.Fatal(err)
	}
	fields, err := client.HKeys(ctx, s.Prefix()+"fc:m").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 1 || fields[0] != "waiting" {
		t.Fatalf("counters after the pump: %v, want only waiting's", fields)
	}
}
