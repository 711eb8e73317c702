package storetest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llm-router/llm-router/state"
)

// TestStoresAgreeOnFairOrder drives the in-memory store and the Redis
// scripts through the same random sequence of requests from four tenants
// of random costs and priorities, queueing behind three workers of small
// caps, cancels and releases reporting random output (settling the
// charges), and requires the same answer from both at
// every step: each claim's result and, after every release or cancel, the
// state of every waiter (so the same waiter was granted the same worker).
// The fair queue's order is the same whichever store, and so whichever
// replica, holds the request.
func TestStoresAgreeOnFairOrder(t *testing.T) {
	ctx := context.Background()
	client := agreeRedis(ctx, t)
	var err error
	var specs []state.WorkerSpec
	var cands []state.Candidate
	for i := range 3 {
		specs = append(specs, state.WorkerSpec{ID: fmt.Sprintf("w%d", i), Address: fmt.Sprintf("10.3.0.%d:1", i), Models: []string{"m"}, MaxConcurrency: 1 + i})
		cands = append(cands, state.Candidate{Worker: specs[i].ID, Cap: specs[i].MaxConcurrency, Slope: 100})
	}
	tenants := []string{"a", "b", "c", "default"}
	prios := []state.Priority{state.PriorityCritical, state.PriorityStandard, state.PriorityStandard, state.PriorityBatch}
	for seed := range uint64(agreeSeeds) {
		stores := agreePair(ctx, t, client, "fairagree", seed, specs)
		rng := rand.New(rand.NewPCG(seed, 11))
		var live []string // claims held or waiting
		grants := 0
		for op := range 300 {
			switch r := rng.IntN(10); {
			case r < 6 || len(live) == 0:
				id := fmt.Sprintf("f%d-%d", seed, op)
				req := state.ClaimRequest{ID: id, Candidates: cands, Queue: &state.QueueSpec{
					Model: "m", Priority: prios[rng.IntN(len(prios))], Allow: 40, Replica: "r",
					Tenant: tenants[rng.IntN(len(tenants))], Cost: float64(1+rng.IntN(40)) / float64(1+rng.IntN(3)),
					ChargedOutput: rng.IntN(20), OutputCost: float64(rng.IntN(3)) / 2,
				}}
				var res [2]state.ClaimResult
				for k, s := range stores {
					if res[k], err = s.Claim(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
				if fmt.Sprint(res[0]) != fmt.Sprint(res[1]) {
					t.Fatalf("seed %d op %d: memory %+v, redis %+v", seed, op, res[0], res[1])
				}
				if res[0].Index >= 0 || res[0].Queued {
					live = append(live, id)
				}
				continue
			case r < 9:
				// Release a held claim (a waiter's release is refused by neither: it
				// may not be granted yet, then nothing changes).
				id, out := live[rng.IntN(len(live))], rng.IntN(25)
				for _, s := range stores {
					if _, err := s.Release(ctx, state.Release{ID: id, OutputTokens: out}); err != nil {
						t.Fatal(err)
					}
				}
			default:
				id := live[rng.IntN(len(live))]
				var st [2]state.WaiterStatus
				for k, s := range stores {
					if st[k], err = s.Cancel(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				if st[0] != st[1] {
					t.Fatalf("seed %d op %d: cancel %s: memory %+v, redis %+v", seed, op, id, st[0], st[1])
				}
				if st[0].State == state.WaiterRemoved {
					live = slices.DeleteFunc(live, func(x string) bool { return x == id })
				}
			}
			for _, id := range live {
				var st [2]state.WaiterStatus
				for k, s := range stores {
					if st[k], err = s.Poll(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				if st[0] != st[1] {
					t.Fatalf("seed %d op %d: %s: memory %+v, redis %+v", seed, op, id, st[0], st[1])
				}
				if st[0].State == state.WaiterGranted {
					grants++
				}
			}
		}
		if grants == 0 {
			t.Fatalf("seed %d: no waiter was ever granted", seed)
		}
	}
}
