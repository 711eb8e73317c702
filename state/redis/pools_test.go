package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/failover"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// TestPoolsShardKeys: each pool's workers and claims live under its own
// hash tag, a snapshot sees every pool, and a worker whose models span
// pools is refused.
func TestPoolsShardKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Redis Cluster")
	}
	ctx := context.Background()
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cluster.Addrs, IsClusterMode: true})
	defer client.Close()
	pools := redisstore.Pools{"chat": {"llama", "llama-long"}, "code": {"coder"}}
	s, err := redisstore.NewPooled(client, "pooltest", state.Limits{}, pools)
	if err != nil {
		t.Fatal(err)
	}
	specs := []state.WorkerSpec{
		{ID: "c0", Address: "10.0.0.1:1", Models: []string{"llama", "llama-long"}, MaxConcurrency: 2},
		{ID: "k0", Address: "10.0.0.2:1", Models: []string{"coder"}, MaxConcurrency: 2},
		{ID: "d0", Address: "10.0.0.3:1", Models: []string{"other"}, MaxConcurrency: 2},
	}
	if err := s.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for id, tag := range map[string]string{"c0": "{pooltest:chat}", "k0": "{pooltest:code}", "d0": "{pooltest}"} {
		if ok, err := client.HExists(ctx, tag+":workers", id).Result(); err != nil || !ok {
			t.Errorf("worker %s not under %s: %v", id, tag, err)
		}
	}
	// A peer that registered nothing finds each worker's pool.
	peer, err := redisstore.NewPooled(client, "pooltest", state.Limits{}, pools)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"c0", "k0", "d0"} {
		res, err := peer.Claim(ctx, state.ClaimRequest{ID: "claim-" + w, Candidates: []state.Candidate{{Worker: w, Cap: 2, Slope: 1}}})
		if err != nil || res.Index != 0 {
			t.Fatalf("claim on %s: %v %+v", w, err, res)
		}
	}
	if n, err := client.HLen(ctx, "{pooltest:code}:claims").Result(); err != nil || n != 1 {
		t.Errorf("code pool holds %d claims, want 1 (%v)", n, err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Workers) != 3 {
		t.Fatalf("snapshot has %d workers, want 3", len(snap.Workers))
	}
	for _, w := range snap.Workers {
		if w.InFlight != 1 {
			t.Errorf("%s in flight %d, want 1", w.Spec.ID, w.InFlight)
		}
	}
	for _, w := range []string{"c0", "k0", "d0"} {
		if ok, err := s.Release(ctx, state.Release{ID: "claim-" + w}); err != nil || !ok {
			t.Errorf("release on %s by another handle: %v %v", w, ok, err)
		}
	}
	mixed := []state.WorkerSpec{{ID: "x", Address: "10.0.0.4:1", Models: []string{"llama", "coder"}, MaxConcurrency: 1}}
	if err := s.Register(ctx, mixed); !errors.Is(err, state.ErrPoolMix) {
		t.Errorf("a worker of two pools registered: %v", err)
	}
	// The failover store refuses it before choosing Redis or local state,
	// so a worker registered while degraded can always be restored.
	f := failover.New(s, nil)
	if _, err := f.RegisterLeased(ctx, mixed[0], time.Minute); !errors.Is(err, state.ErrPoolMix) {
		t.Errorf("a leased worker of two pools registered: %v", err)
	}
	if _, err := redisstore.NewPooled(client, "p", state.Limits{}, redisstore.Pools{"a": {"m"}, "b": {"m"}}); err == nil {
		t.Error("a model in two pools was accepted")
	}
}
