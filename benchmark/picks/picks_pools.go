package picks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/record"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// PoolsResult is one key layout's decision rate in the pools comparison.
type PoolsResult struct {
	Layout string `json:"layout"` // "one shard" or "N pools on a 3-master cluster"
	Pools  int    `json:"pools"`
	// Masters lists, per pool, the cluster master serving its slot.
	Masters []string `json:"masters,omitempty"`
	Result
	// Speedup is PicksPerSecond over the one-shard rate.
	Speedup float64 `json:"speedup"`
	// CPU is each process's CPU over the measurement (the benchmark's own
	// Go process is the schedulers plus their clients), and MachineBusy the
	// whole machine's busy share of all cores (0..1).
	CPU         []host.CPUUse `json:"cpu"`
	MachineBusy float64       `json:"machine_busy"`
}

// Pools measures full decisions per second with the keys on one shard
// (one redis-server, today's layout), then sharded by 1, 2 and 4 pools on a
// 3-master Redis Cluster (one model per pool, each model with o.Workers
// workers, requests to the models in turn: a pick weighs the same
// candidates in every layout), in one run. It reports, for each, the
// CPU of every Redis process and of the benchmark's own process, which
// says where the ceiling is on the host that runs it.
func Pools(ctx context.Context, o Options, poolCounts []int) ([]PoolsResult, error) {
	dir, err := os.MkdirTemp("", "llmr-picks-pools-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	single, err := stack.StartRedis(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	defer single.Stop(2 * time.Second)
	cluster, err := stack.StartCluster(ctx, filepath.Join(dir, "cluster"), 3, 0)
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	pids := map[string]int{"redis (one shard)": single.Pid()}
	for i, n := range cluster.Nodes {
		pids[fmt.Sprintf("redis cluster master %d", i)] = n.Pid()
	}
	replicas := 1
	if len(o.Replicas) > 0 {
		replicas = o.Replicas[len(o.Replicas)-1]
	}

	var out []PoolsResult
	measure := func(layout string, pools int, tgt picksTarget, masters []string) error {
		cpu, machine := host.NewCPUMeter(pids), host.NewMachineMeter()
		cpu.Start()
		machine.Start()
		res, err := picksRunOn(ctx, tgt, replicas, o)
		if err != nil {
			return fmt.Errorf("%s: %w", layout, err)
		}
		r := PoolsResult{Layout: layout, Pools: pools, Masters: masters, Result: res}
		r.CPU, _ = cpu.Stop()
		r.MachineBusy = machine.Stop()
		if len(out) > 0 && out[0].PicksPerSecond > 0 {
			r.Speedup = r.PicksPerSecond / out[0].PicksPerSecond
		} else {
			r.Speedup = 1
		}
		out = append(out, r)
		fmt.Fprintf(o.Out, "%-34s %6.0f picks/s (%.2fx), p50 %4.0f µs, p99 %5.0f µs, %.2f scripts per pick, machine %.0f%% busy\n",
			layout, r.PicksPerSecond, r.Speedup, r.P50Micros, r.P99Micros, r.RoundTrips, 100*r.MachineBusy)
		for _, u := range r.CPU {
			if u.Seconds > 0.05 {
				fmt.Fprintf(o.Out, "    %-28s %.2f cores\n", u.Name, u.Cores)
			}
		}
		return nil
	}

	var first redis.UniversalClient
	err = measure("one shard (one redis-server)", 1, picksTarget{
		prefix: "one", models: []string{"m0"},
		client: func() redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: single.Addr, PoolSize: o.Concurrency + 4, MaxRetries: -1})
			if first == nil {
				first = c
			}
			return c
		},
		calls: func(ctx context.Context) (int64, error) { return roundTrips(ctx, first) },
	}, nil)
	if err != nil {
		return out, err
	}
	for _, n := range poolCounts {
		prefix := fmt.Sprintf("pools%d", n)
		pools := redisstore.Pools{}
		var models, masters []string
		for i := 0; i < n; i++ {
			m := fmt.Sprintf("m%d", i)
			pools[fmt.Sprintf("p%d", i)] = []string{m}
			models = append(models, m)
			node, err := cluster.MasterFor(ctx, fmt.Sprintf("{%s:p%d}:workers", prefix, i))
			if err != nil {
				return out, err
			}
			masters = append(masters, node.Addr)
		}
		err := measure(fmt.Sprintf("%d pool(s) on a 3-master cluster", n), n, picksTarget{
			prefix: prefix, models: models, pools: pools,
			client: func() redis.UniversalClient {
				return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs, PoolSize: o.Concurrency + 4, MaxRetries: -1})
			},
			calls: func(ctx context.Context) (int64, error) { return clusterRoundTrips(ctx, cluster) },
		}, masters)
		if err != nil {
			return out, err
		}
	}
	if o.ResultsDir != "" {
		if err := record.WriteJSON(o.ResultsDir+"/picks_pools.json", out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// clusterRoundTrips sums the scripts every node of the cluster ran.
func clusterRoundTrips(ctx context.Context, c *stack.Cluster) (int64, error) {
	var total int64
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		v, err := roundTrips(ctx, rc)
		_ = rc.Close()
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}
