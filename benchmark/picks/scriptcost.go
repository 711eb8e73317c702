package picks

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// ScriptCost is the Redis server time of the store's scripts for one fleet
// size, from Redis's own INFO commandstats (usec_per_call): what a shard
// spends, without the client's share.
type ScriptCost struct {
	Workers int `json:"workers"` // workers of the one model, all candidates of every claim
	// DecisionMicros is a claim plus its release.
	DecisionMicros float64 `json:"decision_us"`
	SnapshotMicros float64 `json:"snapshot_us"`
	// Renew1000Micros renews the leases of 1,000 claims (one call).
	Renew1000Micros float64 `json:"renew_1000_us"`
}

// ScriptCosts measures, on one fresh redis-server, the server time of a
// decision (claim + release), a snapshot and a renewal for each fleet size,
// sequentially from one client with stats and telemetry filled in.
func ScriptCosts(ctx context.Context, out io.Writer, sizes []int) ([]ScriptCost, error) {
	dir, err := os.MkdirTemp("", "llmr-scriptcost-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := stack.StartRedis(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	defer srv.Stop(2 * time.Second)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	var res []ScriptCost
	for _, w := range sizes {
		sc, err := scriptCost(ctx, c, w)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(out, "%5d workers: decision (claim + release) %6.0f µs, snapshot %7.0f µs, renew of 1,000 claims %6.0f µs\n",
			w, sc.DecisionMicros, sc.SnapshotMicros, sc.Renew1000Micros)
		res = append(res, sc)
	}
	return res, nil
}

func scriptCost(ctx context.Context, c *redis.Client, n int) (ScriptCost, error) {
	s := redisstore.New(c, fmt.Sprintf("cost%d", n), state.Limits{Lease: 30 * time.Second})
	specs := make([]state.WorkerSpec, n)
	cands := make([]state.Candidate, n)
	tele := map[string]state.Telemetry{}
	now := time.Now()
	for i := range specs {
		id := fmt.Sprintf("w%d", i)
		specs[i] = state.WorkerSpec{ID: id, Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250), Models: []string{"m"}, MaxConcurrency: 1 << 20}
		cands[i] = state.Candidate{Worker: id, Cap: 1 << 20, Slope: 1, Base: float64(i % 7)}
		tele[id] = state.Telemetry{KVUsage: state.Sample{Value: 0.5, At: now}, Waiting: state.Sample{Value: 1, At: now}, At: now, By: "r"}
	}
	if err := s.Register(ctx, specs); err != nil {
		return ScriptCost{}, err
	}
	if err := s.PutTelemetry(ctx, tele); err != nil {
		return ScriptCost{}, err
	}
	decide := func(id string) error {
		res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
		if err != nil {
			return err
		}
		_, err = s.Release(ctx, state.Release{ID: id, Worker: cands[res.Index].Worker, Latency: time.Second, TTFT: 100 * time.Millisecond, TokensPerSec: 50, Alpha: 0.2})
		return err
	}
	for i := 0; i < 200; i++ { // every worker's averages exist
		if err := decide(fmt.Sprintf("warm-%d", i)); err != nil {
			return ScriptCost{}, err
		}
	}
	perCall := func(calls int, f func(i int) error) (float64, error) {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return 0, err
		}
		for i := 0; i < calls; i++ {
			if err := f(i); err != nil {
				return 0, err
			}
		}
		return evalshaMicros(c.Info(ctx, "commandstats").Result())
	}
	var sc ScriptCost
	sc.Workers = n
	var err error
	if sc.DecisionMicros, err = perCall(2000, func(i int) error { return decide(fmt.Sprintf("d-%d", i)) }); err != nil {
		return sc, err
	}
	sc.DecisionMicros *= 2 // two scripts a decision
	if sc.SnapshotMicros, err = perCall(200, func(int) error { _, err := s.Snapshot(ctx); return err }); err != nil {
		return sc, err
	}
	held := make([]string, 1000)
	for i := range held {
		held[i] = fmt.Sprintf("h-%d", i)
		if _, err := s.Claim(ctx, state.ClaimRequest{ID: held[i], Candidates: cands}); err != nil {
			return sc, err
		}
	}
	sc.Renew1000Micros, err = perCall(20, func(int) error { return s.Renew(ctx, held, nil) })
	return sc, err
}

func evalshaMicros(info string, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, fmt.Errorf("no evalsha in INFO commandstats")
}
