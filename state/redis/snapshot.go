package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// This file reads the Redis store's snapshot: each shard's workers, queues
// and leases in one round trip per shard, merged.

// Snapshot reads every worker's state, in one round trip per shard.
func (r *Store) Snapshot(ctx context.Context) (state.Snapshot, error) {
	if len(r.shards) == 1 {
		return r.snapshotShard(ctx, r.shards[0])
	}
	var all state.Snapshot
	for _, sh := range r.shards {
		snap, err := r.snapshotShard(ctx, sh)
		if err != nil {
			return state.Snapshot{}, err
		}
		for _, w := range snap.Workers {
			r.where.learnWorker(w.Spec.ID, sh)
		}
		all.Workers = append(all.Workers, snap.Workers...)
		all.Queues = append(all.Queues, snap.Queues...)
		if snap.At.After(all.At) {
			all.At = snap.At
		}
	}
	slices.SortFunc(all.Workers, func(a, b state.Worker) int { return strings.Compare(a.Spec.ID, b.Spec.ID) })
	slices.SortFunc(all.Queues, func(a, b state.QueueDepth) int { return strings.Compare(a.Model, b.Model) })
	return all, nil
}

func (r *Store) snapshotShard(ctx context.Context, sh *shard) (state.Snapshot, error) {
	res, err := r.run(ctx, sh, scriptSnapshot).Slice()
	if err != nil {
		return state.Snapshot{}, fmt.Errorf("redis snapshot: %w", err)
	}
	if len(res) != 17 {
		return state.Snapshot{}, fmt.Errorf("redis snapshot: unexpected reply of %d parts", len(res))
	}
	leases := pairs(res[8])
	teleLists, _ := res[7].([]any)
	now, _ := res[0].(int64)
	workers := pairs(res[1])
	inflight, health, drain := pairs(res[2]), pairs(res[3]), pairs(res[4])
	tokp, tokd, toka := pairs(res[9]), pairs(res[10]), pairs(res[14])
	pblocks, _ := res[11].([]any)
	statsLists, _ := res[5].([]any)
	latLists, _ := res[15].([]any)
	adLists, _ := res[16].([]any)
	limits := parseLimits(pairs(res[12]))
	predicted := pairs(res[13])
	snap := state.Snapshot{At: time.UnixMilli(now)}
	for i, kv := range workers {
		var spec state.WorkerSpec
		if err := json.Unmarshal([]byte(kv[1]), &spec); err != nil {
			return state.Snapshot{}, fmt.Errorf("redis snapshot: worker %s: %w", kv[0], err)
		}
		w := state.Worker{Spec: spec, Health: scoring.Health(lookup(health, kv[0])), Draining: lookup(drain, kv[0]) == "1"}
		w.InFlight, _ = strconv.Atoi(lookup(inflight, kv[0]))
		w.PrefillTokens, _ = strconv.Atoi(lookup(tokp, kv[0]))
		w.DecodeTokens, _ = strconv.Atoi(lookup(tokd, kv[0]))
		w.AheadTokens, _ = strconv.Atoi(lookup(toka, kv[0]))
		w.Limit = limits[kv[0]]
		w.PredictedHitTokens, _ = strconv.ParseInt(lookup(predicted, kv[0]), 10, 64)
		if i < len(statsLists) {
			w.Stats = parseStats(pairs(statsLists[i]))
		}
		if i < len(latLists) {
			w.LatencyStats = parseLatency(pairs(latLists[i]))
		}
		if i < len(adLists) {
			w.Adapters = parsePlacements(pairs(adLists[i]))
		}
		if i < len(pblocks) {
			n, _ := pblocks[i].(int64)
			w.PrefixBlocks = int(n)
		}
		if i < len(teleLists) {
			w.Telemetry = parseTelemetry(pairs(teleLists[i]))
		}
		if exp := lookup(leases, kv[0]); exp != "" {
			ms, _ := strconv.ParseFloat(exp, 64)
			w.Registered, w.LeaseExpires = true, time.UnixMilli(int64(ms))
		}
		snap.Workers = append(snap.Workers, w)
	}
	slices.SortFunc(snap.Workers, func(a, b state.Worker) int { return strings.Compare(a.Spec.ID, b.Spec.ID) })
	qs, _ := res[6].([]any)
	for i := 0; i+3 < len(qs); i += 4 {
		model, _ := qs[i].(string)
		c, _ := qs[i+1].(int64)
		st, _ := qs[i+2].(int64)
		b, _ := qs[i+3].(int64)
		snap.Queues = append(snap.Queues, state.QueueDepth{Model: model, Critical: int(c), Standard: int(st), Batch: int(b)})
	}
	slices.SortFunc(snap.Queues, func(a, b state.QueueDepth) int { return strings.Compare(a.Model, b.Model) })
	return snap, nil
}

func pairs(v any) [][2]string {
	flat, _ := v.([]any)
	out := make([][2]string, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		out = append(out, [2]string{k, val})
	}
	return out
}

func lookup(kvs [][2]string, k string) string {
	for _, kv := range kvs {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

func parseStats(kvs [][2]string) state.Stats {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	ema := func(f string) state.EMA {
		v, _ := strconv.ParseFloat(m[f+"_v"], 64)
		n, _ := strconv.ParseInt(m[f+"_n"], 10, 64)
		t, _ := strconv.ParseInt(m[f+"_t"], 10, 64)
		e := state.EMA{Value: v, Samples: n}
		if t > 0 {
			e.Updated = time.UnixMilli(t)
		}
		return e
	}
	req, _ := strconv.ParseInt(m["req"], 10, 64)
	errs, _ := strconv.ParseInt(m["err"], 10, 64)
	return state.Stats{Latency: ema("lat"), TTFT: ema("ttft"), TokensPerSec: ema("tps"), Requests: req, Errors: errs}
}
