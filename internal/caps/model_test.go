package caps

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// engine is a worker whose TTFT and TPOT are linear in its load, slowed
// by a factor: what the latency model learns.
type engine struct {
	slow float64 // 1: normal speed
}

func (e engine) tpot(f latency.Features) time.Duration {
	s := 0.020 + 0.002*float64(f.Running+1)
	return time.Duration(e.slow * s * float64(time.Second))
}

func (e engine) ttft(f latency.Features) time.Duration {
	s := 0.040 + 0.0001*float64(f.PrefillTokens+f.Uncached) + 0.000002*float64(f.DecodeTokens)
	return time.Duration(e.slow * s * float64(time.Second))
}

// learned feeds the engine's measurements of requests placed at random
// loads, rate a second from `from` for d, into st, and returns it.
func learned(t *testing.T, st latency.Stats, e engine, from time.Time, d time.Duration, rate int, rng *rand.Rand) latency.Stats {
	t.Helper()
	cfg := latency.DefaultConfig()
	step := time.Second / time.Duration(rate)
	for at := from; at.Before(from.Add(d)); at = at.Add(step) {
		running := rng.IntN(50)
		f := latency.Features{Running: running, DecodeTokens: running * 200, Uncached: 100 + rng.IntN(800), Output: 200}
		m := latency.Fit(cfg, st, latency.DefaultPrior(), at)
		o := latency.Observation{At: at, Features: f, TTFT: e.ttft(f), TPOT: e.tpot(f)}
		st = cfg.Add(st, cfg.Contribution(m, o))
	}
	return st
}

type limitStore struct{ puts []map[string]state.Limit }

func (s *limitStore) PutLimits(_ context.Context, l map[string]state.Limit) error {
	s.puts = append(s.puts, l)
	return nil
}

func (s *limitStore) last(id string) (state.Limit, bool) {
	for i := len(s.puts) - 1; i >= 0; i-- {
		if l, ok := s.puts[i][id]; ok {
			return l, true
		}
	}
	return state.Limit{}, false
}

func modelWorker(id string, st latency.Stats, limit state.Limit) state.Worker {
	w := state.Worker{Spec: state.WorkerSpec{ID: id, Models: []string{"m"}}, Limit: limit}
	if len(st.Sums) > 0 {
		w.LatencyStats = map[string]latency.Stats{"m": st}
	}
	// The mix the limit is computed for: 10 requests of 500 + 200 tokens.
	w.InFlight, w.PrefillTokens, w.DecodeTokens = 10, 5000, 2000
	return w
}

// A worker's limit is the load at which its learned TPOT reaches the
// objective, and falls within seconds when the worker slows down.
func TestModelLimitFollowsASlowedWorker(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	obj := Objectives{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}
	store := &limitStore{}
	now := t0
	box := NewModelLearner(store, func(string) Objectives { return obj }, func() time.Time { return now })

	// Five minutes at normal speed: TPOT = 20 ms + 2 ms·n ≤ 100 ms at n = 40.
	st := learned(t, latency.Stats{}, engine{slow: 1}, now, 5*time.Minute, 10, rng)
	now = now.Add(5 * time.Minute)
	if err := box.Learn(context.Background(), state.Snapshot{Workers: []state.Worker{modelWorker("w", st, state.Limit{})}}, []string{"w"}); err != nil {
		t.Fatal(err)
	}
	before, _ := store.last("w")
	if before.Value < 36 || before.Value > 44 {
		t.Fatalf("limit at normal speed = %d, want about 40 (TPOT 20 ms + 2 ms a request against 100 ms)", before.Value)
	}
	if FromState(before).Basis != BasisModel {
		t.Fatalf("limit basis = %q, want %q", FromState(before).Basis, BasisModel)
	}

	// Twice as slow: 40 ms + 4 ms·n ≤ 100 ms at n = 15. Ten requests a
	// second: the limit falls at once and reaches it within seconds.
	limits := map[int]int{}
	last := before
	for s := 1; s <= 15; s++ {
		st = learned(t, st, engine{slow: 2}, now, time.Second, 10, rng)
		now = now.Add(time.Second)
		if err := box.Learn(context.Background(), state.Snapshot{Workers: []state.Worker{modelWorker("w", st, last)}}, []string{"w"}); err != nil {
			t.Fatal(err)
		}
		last, _ = store.last("w")
		limits[s] = last.Value
	}
	t.Logf("limit %d before; 2, 5, 10 and 15 s after the worker halved its speed: %d, %d, %d, %d (exact: 40, then 15)",
		before.Value, limits[2], limits[5], limits[10], limits[15])
	if limits[2] > 32 || limits[10] > 20 {
		t.Fatalf("limits after slowing down = %v, want at most 32 after 2 s and 20 after 10 s (exact 15; before: %d)", limits, before.Value)
	}
}

// A worker whose model is unknown gets no limit, and loses one it had:
// the prior is a slow GPU, and a new worker is worth a try.
func TestModelLimitLeavesUnknownWorkersUncapped(t *testing.T) {
	obj := Objectives{TPOT: 100 * time.Millisecond}
	store := &limitStore{}
	box := NewModelLearner(store, func(string) Objectives { return obj }, func() time.Time { return t0 })
	old := Limit{Value: 3, Estimate: 3, Basis: BasisModel}.State()
	snap := state.Snapshot{Workers: []state.Worker{modelWorker("new", latency.Stats{}, state.Limit{}), modelWorker("was", latency.Stats{}, old)}}
	if err := box.Learn(context.Background(), snap, []string{"new", "was"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.last("new"); ok {
		t.Fatal("a worker with no history and no limit had one written")
	}
	if l, ok := store.last("was"); !ok || !l.IsZero() {
		t.Fatalf("an unknown worker's old limit = %+v (written %v), want lifted", l, ok)
	}
}

// A worker not monitored by this replica is left alone, and a configured
// max_concurrency bounds the limit.
func TestModelLimitBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	st := learned(t, latency.Stats{}, engine{slow: 1}, t0, 3*time.Minute, 10, rng)
	now := t0.Add(3 * time.Minute)
	store := &limitStore{}
	box := NewModelLearner(store, func(string) Objectives { return Objectives{TPOT: 100 * time.Millisecond} }, func() time.Time { return now })
	capped := modelWorker("capped", st, state.Limit{})
	capped.Spec.MaxConcurrency = 8
	snap := state.Snapshot{Workers: []state.Worker{capped, modelWorker("other", st, state.Limit{})}}
	if err := box.Learn(context.Background(), snap, []string{"capped"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := store.last("capped"); l.Value != 8 {
		t.Fatalf("capped worker's limit = %d, want its max_concurrency 8", l.Value)
	}
	if _, ok := store.last("other"); ok {
		t.Fatal("a worker another replica monitors had its limit written")
	}
	// No objectives: no limit.
	none := NewModelLearner(store, func(string) Objectives { return Objectives{} }, func() time.Time { return now })
	store.puts = nil
	if err := none.Learn(context.Background(), state.Snapshot{Workers: []state.Worker{modelWorker("w", st, state.Limit{})}}, []string{"w"}); err != nil {
		t.Fatal(err)
	}
	if len(store.puts) != 0 {
		t.Fatalf("limits written with no objectives: %+v", store.puts)
	}
}

// ModelLimit is the largest count meeting both objectives, at least 1.
func TestModelLimitArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	st := learned(t, latency.Stats{}, engine{slow: 1}, t0, 5*time.Minute, 10, rng)
	m := latency.Fit(latency.DefaultConfig(), st, latency.DefaultPrior(), t0.Add(5*time.Minute))
	for _, c := range []struct {
		name     string
		obj      Objectives
		lo, hi   int
		upper    int
		wantNone bool
	}{
		{name: "tpot binds", obj: Objectives{TPOT: 60 * time.Millisecond}, lo: 17, hi: 23, upper: 1024},
		{name: "ttft binds", obj: Objectives{TTFT: 60 * time.Millisecond, TPOT: time.Second}, lo: 1, hi: 8, upper: 1024},
		{name: "unmeetable alone", obj: Objectives{TPOT: time.Millisecond}, lo: 1, hi: 1, upper: 1024},
		{name: "upper bound", obj: Objectives{TPOT: time.Second}, lo: 5, hi: 5, upper: 5},
		{name: "no objectives", wantNone: true, upper: 1024},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, ok := ModelLimit(m, c.obj, 500, 200, c.upper)
			if ok == c.wantNone {
				t.Fatalf("ok = %v, want %v", ok, !c.wantNone)
			}
			if !c.wantNone && (n < c.lo || n > c.hi) {
				t.Fatalf("limit = %d, want %d..%d", n, c.lo, c.hi)
			}
		})
	}
}
