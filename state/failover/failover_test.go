package failover_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/failover"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// TestFailoverReconciles: claims made and released while Redis is down are
// counted exactly once after it returns, even when it returns empty.
func TestFailoverReconciles(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	ctx := context.Background()
	srv, err := stack.StartRedis(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer client.Close()
	var modes []bool
	f := failover.New(redisstore.New(client, "fo", state.Limits{Lease: 10 * time.Second}), func(d bool, _ error) { modes = append(modes, d) })
	specs := []state.WorkerSpec{{ID: "a", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 4}, {ID: "b", Address: "10.0.0.2:1", Models: []string{"m"}, MaxConcurrency: 4}}
	if err := f.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	cands := []state.Candidate{{Worker: "a", Cap: 4, Slope: 1}, {Worker: "b", Cap: 4, Slope: 1, Base: 0.5}}
	claim := func(id string) string {
		t.Helper()
		res, err := f.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
		if err != nil || res.Index < 0 {
			t.Fatalf("claim %s: %v %+v", id, err, res)
		}
		return cands[res.Index].Worker
	}
	claim("before-1") // a
	claim("before-2") // b
	if _, err := f.Release(ctx, state.Release{ID: "before-1", Latency: time.Second, Alpha: 0.2}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx); err != nil { // the periodic refresh
		t.Fatal(err)
	}

	srv.Kill()
	if got := claim("during"); got != "a" { // local: a has 0, b has 1
		t.Fatalf("local claim went to %s, want a", got)
	}
	if !f.Degraded() {
		t.Fatal("not degraded with Redis down")
	}
	if _, err := f.Release(ctx, state.Release{ID: "before-2", Latency: 2 * time.Second, Alpha: 0.2}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetDraining(ctx, "b", true); err != nil {
		t.Fatal(err)
	}

	srv2, err := srv.Restart(ctx) // empty: Redis lost everything
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop(time.Second)
	if err := stack.WaitFor(ctx, 5*time.Second, func() error { return f.Recover(ctx) }); err != nil {
		t.Fatal(err)
	}
	if f.Degraded() || len(modes) != 2 || !modes[0] || modes[1] {
		t.Fatalf("mode changes %v, degraded %v", modes, f.Degraded())
	}
	snap, err := redisstore.New(client, "fo", state.Limits{}).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]state.Worker{}
	for _, w := range snap.Workers {
		got[w.Spec.ID] = w
	}
	if len(got) != 2 || got["a"].InFlight != 1 || got["b"].InFlight != 0 {
		t.Fatalf("after recovery: %+v", snap.Workers)
	}
	if !got["b"].Draining {
		t.Fatal("drain set during the outage was lost")
	}
	if got["a"].Stats.Latency.Samples != 1 || got["b"].Stats.Latency.Samples != 1 {
		t.Fatalf("averages lost: a %+v b %+v", got["a"].Stats, got["b"].Stats)
	}
	if ok, err := f.Release(ctx, state.Release{ID: "during"}); err != nil || !ok {
		t.Fatalf("release of the claim made during the outage: %v %v", ok, err)
	}
	snap, _ = redisstore.New(client, "fo", state.Limits{}).Snapshot(ctx)
	for _, w := range snap.Workers {
		if w.InFlight != 0 {
			t.Fatalf("%s left at %d", w.Spec.ID, w.InFlight)
		}
	}
}
