package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file holds the Redis store's fleet bookkeeping: registered
// workers' leases, health reports, monitor leases and scraped telemetry.

func parseTelemetry(kvs [][2]string) state.Telemetry {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	ms := func(f string) time.Time {
		v, err := strconv.ParseInt(m[f], 10, 64)
		if err != nil || v <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(v)
	}
	sample := func(f string) state.Sample {
		v, err := strconv.ParseFloat(m[f], 64)
		if err != nil {
			return state.Sample{}
		}
		return state.Sample{Value: v, At: ms(f + "_t")}
	}
	return state.Telemetry{
		KVUsage: sample("kv"), Waiting: sample("wait"), Running: sample("run"), GPUUtil: sample("gpu"),
		PrefixHits: sample("phit"), KVBlocks: sample("kvb"), StartTime: sample("start"),
		HitMark: sample("hmark"), PredictedMark: sample("pmark"), HitRatio: sample("hratio"),
		GapMark: sample("gmark"), SlowMark: sample("smark"), SlowShare: sample("sshare"),
		At: ms("at"), By: m["by"], Error: m["err"],
		Adapters: parseAdapterReport(m["lora"]),
	}
}

// ReportHealth feeds an active health check's result to the state machine
// and returns the worker's health afterwards.
func (r *Store) ReportHealth(ctx context.Context, worker string, ok bool) (scoring.Health, error) {
	v := "0"
	if ok {
		v = "1"
	}
	st, err := r.run(ctx, r.shardOfWorker(ctx, worker), scriptHealth, worker, v).Text()
	return scoring.Health(st), scriptError(err)
}

// AcquireMonitors takes or keeps the monitor lease of each worker and
// returns those this replica monitors now.
func (r *Store) AcquireMonitors(ctx context.Context, replica string, workers []string, ttl time.Duration) ([]string, error) {
	groups := map[*shard][]any{}
	for _, w := range workers {
		sh := r.shardOfWorker(ctx, w)
		if groups[sh] == nil {
			groups[sh] = []any{replica, ttl.Milliseconds()}
		}
		groups[sh] = append(groups[sh], w)
	}
	var mine []string
	for sh, args := range groups {
		got, err := r.run(ctx, sh, scriptMonitor, args...).StringSlice()
		if err != nil {
			return nil, fmt.Errorf("redis monitor leases: %w", err)
		}
		mine = append(mine, got...)
	}
	return mine, nil
}

// PutTelemetry stores scrape results, one round trip for all.
func (r *Store) PutTelemetry(ctx context.Context, ts map[string]state.Telemetry) error {
	groups := map[*shard][]any{}
	counts := map[*shard]int{}
	for id, t := range ts {
		sh := r.shardOfWorker(ctx, id)
		fields := telemetryFields(t)
		groups[sh] = append(groups[sh], id, len(fields)/2)
		groups[sh] = append(groups[sh], fields...)
		counts[sh]++
	}
	for sh, args := range groups {
		if err := r.run(ctx, sh, scriptTele, append([]any{counts[sh]}, args...)...).Err(); err != nil {
			return fmt.Errorf("redis telemetry: %w", err)
		}
	}
	return nil
}

func telemetryFields(t state.Telemetry) []any {
	var out []any
	add := func(f string, s state.Sample) {
		if !s.At.IsZero() {
			out = append(out, f, fnum(s.Value), f+"_t", s.At.UnixMilli())
		}
	}
	add("kv", t.KVUsage)
	add("wait", t.Waiting)
	add("run", t.Running)
	add("gpu", t.GPUUtil)
	add("phit", t.PrefixHits)
	add("kvb", t.KVBlocks)
	add("start", t.StartTime)
	add("hmark", t.HitMark)
	add("pmark", t.PredictedMark)
	add("hratio", t.HitRatio)
	add("gmark", t.GapMark)
	add("smark", t.SlowMark)
	add("sshare", t.SlowShare)
	out = append(out, adapterFields(t.Adapters)...)
	out = append(out, "at", t.At.UnixMilli(), "by", t.By)
	if t.Error != "" {
		out = append(out, "err", t.Error)
	}
	return out
}

// RegisterLeased registers a worker that must heartbeat within lease, or
// leaves the fleet; it returns the lease expiry.
func (r *Store) RegisterLeased(ctx context.Context, spec state.WorkerSpec, lease time.Duration) (time.Time, error) {
	if err := r.Register(ctx, []state.WorkerSpec{spec}); err != nil {
		return time.Time{}, err
	}
	return r.workerOp(ctx, "lease", spec.ID, lease)
}

// Heartbeat extends a registered worker's lease.
func (r *Store) Heartbeat(ctx context.Context, id string, lease time.Duration) (time.Time, error) {
	return r.workerOp(ctx, "beat", id, lease)
}

// Deregister removes a worker from the fleet; its in-flight requests end
// normally.
func (r *Store) Deregister(ctx context.Context, id string) error {
	_, err := r.workerOp(ctx, "drop", id, 0)
	return err
}

func (r *Store) workerOp(ctx context.Context, op, id string, lease time.Duration) (time.Time, error) {
	ms, err := r.run(ctx, r.shardOfWorker(ctx, id), scriptWorkers, op, id, lease.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, scriptError(err)
	}
	if ms == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms), nil
}
