// Package picks measures the scheduler's decisions per second against a
// real redis-server (llm-bench picks): full decisions with one and three
// replicas, a bare claim+release loop as their floor, the same on pools of
// a Redis Cluster, and the Redis server time of each script per fleet size
// (llm-bench script-cost).
package picks

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// Options configure the pick-throughput benchmark.
type Options struct {
	Workers     int
	Replicas    []int // e.g. 1 and 3
	Duration    time.Duration
	Concurrency int // goroutines per replica
	Out         io.Writer
	ResultsDir  string
	// Rounds alternates the bare claim+release loop and the scheduler this
	// many times per replica count (0: the scheduler only, once).
	Rounds int
	// Prefix turns on the prefix and token-load terms (weights 3 and 2)
	// and gives every request a 64-block prompt (1,024 tokens) whose first
	// 48 blocks are one of 32 shared prefixes: the claim script then looks
	// up and records blocks on every pick.
	Prefix bool
}

// picksPrompt is pick k's prompt blocks with Prefix: a shared prefix of
// 48 blocks (one of 32) and 16 blocks of its own.
func picksPrompt(k int, r int) []uint64 {
	out := make([]uint64, 64)
	for i := range out {
		if i < 48 {
			out[i] = uint64(k%32)<<32 | uint64(i)
		} else {
			out[i] = uint64(r)<<56 | uint64(k)<<16 | uint64(i)
		}
	}
	return out
}

// Result is one replica count's throughput.
type Result struct {
	Replicas       int     `json:"replicas"`
	Workers        int     `json:"workers"`
	Picks          int64   `json:"picks"`
	PicksPerSecond float64 `json:"picks_per_second"`
	P50Micros      float64 `json:"pick_p50_us"`
	P99Micros      float64 `json:"pick_p99_us"`
	Errors         int64   `json:"errors"`
	RoundTrips     float64 `json:"redis_round_trips_per_pick"`
	// Round and Bare are set with Options.Rounds: the bare
	// claim+release loop measured just before, and this rate over its.
	Round       int     `json:"round,omitempty"`
	Bare        *Result `json:"bare,omitempty"`
	RatioToBare float64 `json:"ratio_to_bare,omitempty"`
}

// Run measures full scheduler decisions (snapshot-based plan, atomic
// claim in Redis, release with the average update) per second against one
// real redis-server, for each replica count: replicas are scheduler
// instances with their own Redis connection pools, every decision logged
// (JSON, discarded) as in production.
func Run(ctx context.Context, o Options) ([]Result, error) {
	dir, err := os.MkdirTemp("", "llmr-picks-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := stack.StartRedis(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	defer srv.Stop(2 * time.Second)

	var out []Result
	for _, n := range o.Replicas {
		if o.Rounds > 0 {
			rs, err := picksRounds(ctx, srv.Addr, n, o)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
			continue
		}
		res, err := picksRun(ctx, srv.Addr, fmt.Sprintf("picks%d", n), n, o)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(o.Out, "%d replica(s), %d workers: %.0f picks/s, p50 %.0f µs, p99 %.0f µs, %.2f Redis round trips per pick\n",
			res.Replicas, res.Workers, res.PicksPerSecond, res.P50Micros, res.P99Micros, res.RoundTrips)
		out = append(out, res)
	}
	if o.ResultsDir != "" {
		if err := record.WriteJSON(o.ResultsDir+"/picks.json", out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func picksRun(ctx context.Context, addr, prefix string, replicas int, o Options) (Result, error) {
	var first redis.UniversalClient
	return picksRunOn(ctx, picksTarget{
		prefix: prefix, models: []string{"m"},
		client: func() redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: o.Concurrency + 4, MaxRetries: -1})
			if first == nil {
				first = c
			}
			return c
		},
		calls: func(ctx context.Context) (int64, error) { return roundTrips(ctx, first) },
	}, replicas, o)
}

// picksTarget is the Redis a picks run measures: how a replica connects,
// the pools its keys are sharded by, the models requested (in turn), and
// how many scripts every server ran so far.
type picksTarget struct {
	prefix string
	client func() redis.UniversalClient
	pools  redisstore.Pools
	models []string
	calls  func(ctx context.Context) (int64, error)
}

func picksRunOn(ctx context.Context, tgt picksTarget, replicas int, o Options) (Result, error) {
	var specs []state.WorkerSpec
	for i := 0; i < o.Workers*len(tgt.models); i++ {
		// Each model has o.Workers workers of its own, so a pick weighs
		// the same number of candidates whatever the number of models.
		specs = append(specs, state.WorkerSpec{
			ID: fmt.Sprintf("gpu-%d", i), Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250),
			Models: []string{tgt.models[i%len(tgt.models)]}, MaxConcurrency: 1 << 20,
		})
	}
	discard := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	var scheds []*scheduler.Scheduler
	var clients []redis.UniversalClient
	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	for r := 0; r < replicas; r++ {
		c := tgt.client()
		clients = append(clients, c)
		store, err := redisstore.NewPooled(c, tgt.prefix, state.Limits{}, tgt.pools)
		if err != nil {
			return Result{}, err
		}
		if err := store.Register(ctx, specs); err != nil {
			return Result{}, err
		}
		weights := scoring.Weights{Active: 100, Terms: scoring.DefaultTermWeights()}
		if o.Prefix {
			weights.Prefix, weights.TokenLoad = 3, 2
		}
		m := metrics.New() // counted as in the router
		s, err := scheduler.New(m.CountStore(store), scheduler.Options{
			Strategy: scoring.Scored,
			Params: scoring.Params{
				Weights:      weights,
				JobCostScale: 10 * time.Second, MinSamples: 3, Staleness: time.Minute, LoadPenalty: 0.1,
			},
			ReplicaID:     fmt.Sprintf("r%d", r),
			Logger:        discard,
			LogCandidates: 8,
			Observer:      m,
		})
		if err != nil {
			return Result{}, err
		}
		if err := s.Refresh(ctx); err != nil {
			return Result{}, err
		}
		go s.Run(bg)
		scheds = append(scheds, s)
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	before, err := tgt.calls(ctx)
	if err != nil {
		return Result{}, err
	}

	var steps []loopStep
	for ri, s := range scheds {
		for g := 0; g < o.Concurrency; g++ {
			base, r := g*1_000_003, ri*o.Concurrency+g
			steps = append(steps, func(k int) (time.Duration, bool) {
				t0 := time.Now()
				k += base + 1
				model := tgt.models[k%len(tgt.models)]
				req := scheduler.Request{ID: "bench", Model: model, MaxTokens: 128, PromptTokens: 256}
				if o.Prefix {
					req.PromptTokens, req.Blocks = 1024, picksPrompt(k, r)
				}
				tk, err := s.Admit(ctx, req)
				if err != nil {
					return 0, false
				}
				l := time.Since(t0)
				tk.Finish(scheduler.Outcome{Status: 200})
				return l, true
			})
		}
	}
	loop := closedLoop(ctx, o.Duration, steps)
	after, err := tgt.calls(ctx)
	if err != nil {
		return Result{}, err
	}
	return loop.result(replicas, len(specs), after-before), nil
}

// roundTrips counts the scripts Redis ran (each is one round trip; the
// commands inside them are not).
func roundTrips(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range []string{"evalsha", "eval", "info", "ping", "hello"} {
		key := "cmdstat_" + name + ":calls="
		if i := strings.Index(info, key); i >= 0 {
			var v int64
			if _, err := fmt.Sscanf(info[i+len(key):], "%d", &v); err != nil {
				return 0, fmt.Errorf("parse %s: %w", key, err)
			}
			total += v
		}
	}
	return total, nil
}
