package failover_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/failover"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// TestDegradedLatencyAndFirstToken: while Redis is down, latency
// statistics add to what the last snapshot showed, and a claim made
// locally holds its prefill ahead until its first token.
func TestDegradedLatencyAndFirstToken(t *testing.T) {
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
	f := failover.New(redisstore.New(client, "fl", state.Limits{Lease: 10 * time.Second}), nil)
	if err := f.Register(ctx, []state.WorkerSpec{{ID: "a", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 4}}); err != nil {
		t.Fatal(err)
	}
	cfg := latency.DefaultConfig()
	now := time.Now()
	obs := latency.Observation{At: now, Features: latency.Features{Running: 3, Uncached: 500, Output: 100}, TTFT: 80 * time.Millisecond, TPOT: 20 * time.Millisecond}
	c := cfg.Contribution(latency.Model{Epoch: now}, obs)
	add := []state.LatencyContribution{{Worker: "a", Model: "m", Stats: c}}
	if err := f.AddLatency(ctx, add); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx); err != nil { // the periodic refresh
		t.Fatal(err)
	}
	srv.Kill()
	if err := f.AddLatency(ctx, add); err != nil {
		t.Fatal(err)
	}
	if !f.Degraded() {
		t.Fatal("not degraded with Redis down")
	}
	res, err := f.Claim(ctx, state.ClaimRequest{ID: "local", Candidates: []state.Candidate{{Worker: "a", Cap: 4}}, Prompt: scoring.Prompt{PromptTokens: 300}})
	if err != nil || res.Index != 0 {
		t.Fatalf("local claim: %+v %v", res, err)
	}
	worker := func() state.Worker {
		t.Helper()
		snap, err := f.Snapshot(ctx)
		if err != nil || len(snap.Workers) != 1 {
			t.Fatalf("snapshot: %+v %v", snap, err)
		}
		return snap.Workers[0]
	}
	w := worker()
	if w.AheadTokens != 300 {
		t.Fatalf("local claim: %d ahead, want 300", w.AheadTokens)
	}
	want := cfg.Add(c, c)
	got := w.LatencyStats["m"]
	if !got.Epoch.Equal(want.Epoch) || !slices.Equal(got.Sums, want.Sums) {
		t.Fatalf("local stats %+v, want the snapshot's plus one contribution", got)
	}
	if err := f.FirstToken(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	if w := worker(); w.AheadTokens != 0 || w.PrefillTokens != 300 {
		t.Fatalf("after the first token: %d ahead, %d prefill; want 0, 300", w.AheadTokens, w.PrefillTokens)
	}
}
