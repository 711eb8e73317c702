package memory

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

// TestPumpForgetsDecayedCounters: as the Redis store's test of the name.
func TestPumpForgetsDecayedCounters(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	s := New(func() time.Time { return now }, state.Limits{Lease: time.Minute, FairHalfLife: 10 * time.Millisecond})
	if err := s.Register(ctx, []state.WorkerSpec{{ID: "w0", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	cands := []state.Candidate{{Worker: "w0", Cap: 1, Slope: 1}}
	claim := func(id, tenant string) {
		if _, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands, Queue: &state.QueueSpec{Model: "m", Allow: 10, Replica: "r", Tenant: tenant, Cost: 100}}); err != nil {
			t.Fatal(err)
		}
	}
	claim("once", "seen-once")
	claim("waits", "waiting")
	if _, err := s.Release(ctx, state.Release{ID: "once"}); err != nil {
		t.Fatal(err)
	}
	claim("waits-2", "waiting")
	now = now.Add(300 * time.Millisecond)
	if err := s.Pump(ctx); err != nil {
		t.Fatal(err)
	}
	if len(s.fair.counters) != 1 {
		t.Fatalf("counters after the pump: %v, want only waiting's", s.fair.counters)
	}
	if _, ok := s.fair.counters[fairKey{"m", "waiting"}]; !ok {
		t.Fatalf("waiting's counter is gone: %v", s.fair.counters)
	}
}
