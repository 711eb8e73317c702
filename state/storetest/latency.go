package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// runLatency checks the latency-model statistics (state.Latencies): sums
// that add across replicas, rebased where epochs differ or weights grow
// too large, forgotten with the worker.
func runLatency(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("LatencySumsAdd", func(t *testing.T) {
		s := newStore(t, def)
		latencySums(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("LatencyEpochMismatchRebased", func(t *testing.T) { latencyMismatch(t, newStore(t, def)) })
	t.Run("LatencyConcurrentAddsSum", func(t *testing.T) {
		s := newStore(t, def)
		latencyConcurrent(t, s, peers(t, s, newPeer, 3))
	})
	t.Run("LatencyGoesWithWorker", func(t *testing.T) { latencyForgotten(t, newStore(t, def)) })
	t.Run("LatencyRebaseKeepsTheModel", func(t *testing.T) { latencyRebase(t, newStore(t, def)) })
}

var latencyCfg = latency.DefaultConfig()

// observation is a measured request at at, with features drawn from rng.
func observation(rng *rand.Rand, at time.Time) latency.Observation {
	f := latency.Features{Running: rng.IntN(30), PrefillTokens: rng.IntN(8000), DecodeTokens: rng.IntN(20000), Uncached: rng.IntN(4000), Output: 1 + rng.IntN(500)}
	ttft := time.Duration(20+rng.IntN(2000)) * time.Millisecond
	tpot := time.Duration(5+rng.IntN(80)) * time.Millisecond
	return latency.Observation{At: at, Features: f, TTFT: ttft, TPOT: tpot}
}

// contribution is what o adds to stats of the given epoch.
func contribution(o latency.Observation, epoch time.Time) latency.Stats {
	return latencyCfg.Contribution(latency.Model{Epoch: epoch}, o)
}

func addLatency(t *testing.T, s state.Store, cs ...state.LatencyContribution) {
	t.Helper()
	if err := s.AddLatency(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
}

// latencyOf is worker's stats for model in a snapshot (ok false: none, or
// no such worker).
func latencyOf(t *testing.T, s state.Store, worker, model string) (latency.Stats, bool) {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == worker {
			st, ok := w.LatencyStats[model]
			return st, ok
		}
	}
	return latency.Stats{}, false
}

// sameStats fails unless got and want have the same epoch and sums within
// relative tolerance rel.
func sameStats(t *testing.T, what string, got, want latency.Stats, rel float64) {
	t.Helper()
	if !got.Epoch.Equal(want.Epoch) || len(got.Sums) != len(want.Sums) {
		t.Fatalf("%s: epoch %v with %d sums, want %v with %d", what, got.Epoch, len(got.Sums), want.Epoch, len(want.Sums))
	}
	for i := range want.Sums {
		if d := math.Abs(got.Sums[i] - want.Sums[i]); d > rel*math.Abs(want.Sums[i]) && d > 1e-300 {
			t.Fatalf("%s: sum %d is %v, want %v", what, i, got.Sums[i], want.Sums[i])
		}
	}
}

// latencySums: contributions from two replicas in one epoch add element by
// element, per worker and model; one for an unknown worker is dropped
// without failing the others.
func latencySums(t *testing.T, s, peer state.Store) {
	register(t, s, workers(2, 8))
	rng := rand.New(rand.NewPCG(1, 2))
	epoch := time.Now().Add(-10 * time.Second)
	a, b, c, d := contribution(observation(rng, epoch.Add(time.Second)), epoch), contribution(observation(rng, epoch.Add(2*time.Second)), epoch),
		contribution(observation(rng, epoch.Add(3*time.Second)), epoch), contribution(observation(rng, epoch), epoch)
	addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: a}, state.LatencyContribution{Worker: "ghost", Model: "m", Stats: c})
	addLatency(t, peer, state.LatencyContribution{Worker: "w0", Model: "m", Stats: b}, state.LatencyContribution{Worker: "w1", Model: "m", Stats: c},
		state.LatencyContribution{Worker: "w0", Model: "m2", Stats: d})
	got, ok := latencyOf(t, s, "w0", "m")
	if !ok {
		t.Fatal("no stats for w0")
	}
	sameStats(t, "w0/m", got, latencyCfg.Add(a, b), 1e-12)
	got, _ = latencyOf(t, peer, "w1", "m")
	sameStats(t, "w1/m", got, c, 0)
	got, _ = latencyOf(t, s, "w0", "m2")
	sameStats(t, "w0/m2", got, d, 0)
	if _, ok := latencyOf(t, s, "ghost", "m"); ok {
		t.Fatal("stats kept for an unknown worker")
	}
}

// latencyMismatch: a contribution of another epoch is rebased to the
// stored one, as latency.Config.Add does.
func latencyMismatch(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	rng := rand.New(rand.NewPCG(3, 4))
	e1 := time.Now().Add(-30 * time.Second)
	e2 := e1.Add(7 * time.Second)
	a := contribution(observation(rng, e1.Add(time.Second)), e1)
	b := contribution(observation(rng, e2.Add(5*time.Second)), e2)
	addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: a})
	addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: b})
	got, _ := latencyOf(t, s, "w0", "m")
	sameStats(t, "after a contribution of another epoch", got, latencyCfg.Add(a, b), 1e-12)
}

// latencyConcurrent: 24 goroutines over the replicas add 10 batches each,
// a third of them in another epoch; the sums are exact within float
// rounding of the order of additions.
func latencyConcurrent(t *testing.T, s state.Store, replicas []state.Store) {
	register(t, s, workers(2, 8))
	epoch := time.Now().Add(-20 * time.Second)
	rng := rand.New(rand.NewPCG(5, 6))
	first := contribution(observation(rng, epoch), epoch)
	addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: first}, state.LatencyContribution{Worker: "w1", Model: "m", Stats: first})
	const goroutines, batches = 24, 10
	cs := make([][]state.LatencyContribution, goroutines*batches)
	want := map[string]latency.Stats{"w0": first, "w1": first}
	for i := range cs {
		e := epoch
		if i%3 == 0 {
			e = epoch.Add(4 * time.Second)
		}
		for _, w := range []string{"w0", "w1"} {
			c := contribution(observation(rng, e.Add(time.Duration(rng.IntN(5000))*time.Millisecond)), e)
			cs[i] = append(cs[i], state.LatencyContribution{Worker: w, Model: "m", Stats: c})
			want[w] = latencyCfg.Add(want[w], c)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		st := replicas[g%len(replicas)]
		wg.Go(func() {
			for b := range batches {
				if err := st.AddLatency(context.Background(), cs[g*batches+b]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, w := range []string{"w0", "w1"} {
		got, _ := latencyOf(t, s, w, "m")
		sameStats(t, fmt.Sprintf("%s after %d concurrent adds", w, goroutines*batches), got, want[w], 1e-9)
	}
}

// latencyForgotten: a worker that leaves (deregistered, or its
// registration lease lapsed) loses its stats; one whose engine restarted
// (ForgetPrefixes) or turned unhealthy keeps them.
func latencyForgotten(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(2, 8))
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Now()
	c := contribution(observation(rng, now), now)
	addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: c}, state.LatencyContribution{Worker: "w1", Model: "m", Stats: c})
	if err := s.ForgetPrefixes(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := latencyOf(t, s, "w1", "m"); !ok {
		t.Fatal("an engine restart (ForgetPrefixes) dropped the worker's latency stats")
	}
	if err := s.Deregister(ctx, "w0"); err != nil {
		t.Fatal(err)
	}
	register(t, s, workers(1, 8))
	if _, ok := latencyOf(t, s, "w0", "m"); ok {
		t.Fatal("a worker that left and came back kept its latency stats")
	}
	dyn := state.WorkerSpec{ID: "dyn", Address: "10.9.9.7:8000", Models: []string{"m"}, MaxConcurrency: 2}
	if _, err := s.RegisterLeased(ctx, dyn, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	addLatency(t, s, state.LatencyContribution{Worker: "dyn", Model: "m", Stats: c})
	if _, ok := latencyOf(t, s, "dyn", "m"); !ok {
		t.Fatal("no stats for a registered worker")
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && hasWorker(t, s, "dyn") {
		time.Sleep(50 * time.Millisecond)
	}
	if hasWorker(t, s, "dyn") {
		t.Fatal("a worker whose lease lapsed stayed")
	}
	if _, err := s.RegisterLeased(ctx, dyn, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok := latencyOf(t, s, "dyn", "m"); ok {
		t.Fatal("a worker whose lease lapsed kept its latency stats")
	}
}

// latencyRebase: stats whose epoch is about to pass latency's bound (the
// newest weight e^30, 216 s on the fast timescale) are rebased by the adds
// that follow, and the model fit from them stays the same.
func latencyRebase(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	rng := rand.New(rand.NewPCG(9, 10))
	epoch := time.Now().Add(-215 * time.Second)
	var want latency.Stats
	var batch []state.LatencyContribution
	for i := range 20 {
		c := contribution(observation(rng, epoch.Add(time.Duration(i)*10*time.Second)), epoch)
		batch = append(batch, state.LatencyContribution{Worker: "w0", Model: "m", Stats: c})
		want = latencyCfg.Add(want, c)
	}
	addLatency(t, s, batch...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A fresh contribution, of its own epoch: rebased to the stored
		// one, until the stored one passes the bound.
		now := time.Now()
		c := contribution(observation(rng, now), time.Time{})
		addLatency(t, s, state.LatencyContribution{Worker: "w0", Model: "m", Stats: c})
		want = latencyCfg.Add(want, c)
		got, _ := latencyOf(t, s, "w0", "m")
		if !got.Epoch.Equal(epoch) {
			if got.Epoch.Before(epoch.Add(200 * time.Second)) {
				t.Fatalf("rebased to %v, %v after the old epoch", got.Epoch, got.Epoch.Sub(epoch))
			}
			at := time.Now()
			prior := latency.DefaultPrior()
			a, b := latency.Fit(latencyCfg, want, prior, at), latency.Fit(latencyCfg, got, prior, at)
			for i := range a.TTFT.Coef {
				for _, p := range [][2]float64{{a.TTFT.Coef[i], b.TTFT.Coef[i]}, {a.TTFT.Slow[i], b.TTFT.Slow[i]}, {a.TPOT.Coef[i], b.TPOT.Coef[i]}, {a.TPOT.Slow[i], b.TPOT.Slow[i]}} {
					if math.Abs(p[0]-p[1]) > 1e-6*math.Abs(p[0])+1e-12 {
						t.Fatalf("coefficient %d: %v rebased, %v not", i, p[1], p[0])
					}
				}
			}
			if math.Abs(a.TTFT.Samples-b.TTFT.Samples) > 1e-6*a.TTFT.Samples {
				t.Fatalf("samples %v rebased, %v not", b.TTFT.Samples, a.TTFT.Samples)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("stats past latency's bound were never rebased")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasWorker(t *testing.T, s state.Store, id string) bool {
	t.Helper()
	_, ok := inFlight(t, s)[id]
	return ok
}
