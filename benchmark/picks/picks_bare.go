package picks

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// bareRun is the floor of a picks run: the same workers, replicas,
// goroutines and redis-server, but each goroutine only runs the claim
// script on a fixed candidate list and the release script, through the
// Redis store, with no scheduler (no snapshot, plan, scoring, decision
// record or log). Its rate is what Redis and the client library allow; the
// scheduler's rate over it is what the rest of a decision costs.
func bareRun(ctx context.Context, addr, prefix string, replicas int, o Options) (Result, error) {
	specs := make([]state.WorkerSpec, o.Workers)
	cands := make([]state.Candidate, o.Workers)
	for i := range specs {
		id := fmt.Sprintf("gpu-%d", i)
		specs[i] = state.WorkerSpec{ID: id, Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250), Models: []string{"m"}, MaxConcurrency: 1 << 20}
		// The scored strategy's shape for an idle, unmeasured fleet: a
		// per-worker base and 100 a request in flight.
		cands[i] = state.Candidate{Worker: id, Cap: 1 << 20, Base: float64(i % 7), Slope: 100}
	}
	var stores []*redisstore.Store
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for r := 0; r < replicas; r++ {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: o.Concurrency + 4, MaxRetries: -1})
		clients = append(clients, c)
		s, err := redisstore.NewPooled(c, prefix, state.Limits{}, nil)
		if err != nil {
			return Result{}, err
		}
		if err := s.Register(ctx, specs); err != nil {
			return Result{}, err
		}
		stores = append(stores, s)
	}
	before, err := roundTrips(ctx, clients[0])
	if err != nil {
		return Result{}, err
	}
	var steps []loopStep
	for ri, s := range stores {
		for g := 0; g < o.Concurrency; g++ {
			name := fmt.Sprintf("bare-%d-%d-", ri, g)
			steps = append(steps, func(k int) (time.Duration, bool) {
				t0 := time.Now()
				id := name + strconv.Itoa(k)
				res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
				if err != nil || res.Index < 0 {
					return 0, false
				}
				l := time.Since(t0)
				if _, err := s.Release(ctx, state.Release{ID: id, Worker: cands[res.Index].Worker, Latency: time.Millisecond, Alpha: 0.2}); err != nil {
					return 0, false
				}
				return l, true
			})
		}
	}
	loop := closedLoop(ctx, o.Duration, steps)
	after, err := roundTrips(ctx, clients[0])
	if err != nil {
		return Result{}, err
	}
	return loop.result(replicas, len(specs), after-before), nil
}

// picksRounds alternates the bare loop and the scheduler o.Rounds times on
// fresh key prefixes, and prints the scheduler's rate over the bare loop's
// per round and their median.
func picksRounds(ctx context.Context, addr string, replicas int, o Options) ([]Result, error) {
	var out []Result
	var ratios []float64
	for r := 1; r <= o.Rounds; r++ {
		bare, err := bareRun(ctx, addr, fmt.Sprintf("bare%d.%d", replicas, r), replicas, o)
		if err != nil {
			return out, err
		}
		res, err := picksRun(ctx, addr, fmt.Sprintf("picks%d.%d", replicas, r), replicas, o)
		if err != nil {
			return out, err
		}
		res.Round, res.Bare = r, &bare
		res.RatioToBare = res.PicksPerSecond / max(bare.PicksPerSecond, 1e-9)
		ratios = append(ratios, res.RatioToBare)
		fmt.Fprintf(o.Out, "round %d, %d replica(s), %d workers: bare claim+release %.0f/s (%.2f round trips), scheduler %.0f picks/s (%.2f round trips, p50 %.0f µs, p99 %.0f µs): %.2f× the bare loop\n",
			r, replicas, res.Workers, bare.PicksPerSecond, bare.RoundTrips, res.PicksPerSecond, res.RoundTrips, res.P50Micros, res.P99Micros, res.RatioToBare)
		out = append(out, res)
	}
	sp := stats.SpreadOf(ratios)
	fmt.Fprintf(o.Out, "%d replica(s): scheduler ÷ bare loop %.2f× [%.2f–%.2f] over %d rounds (aim ≥ 0.6×)\n", replicas, sp.Median, sp.Min, sp.Max, o.Rounds)
	return out, nil
}
