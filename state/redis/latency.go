package redis

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// This file holds the latency-model statistics (state.Latencies): per
// worker a hash {P}:lat:<id> of model → MessagePack array {epoch, sums...}
// in the worker's shard, added to by latency.lua element-wise, so replicas
// add in any order. Deregistering the worker (or its lease lapsing)
// deletes the hash; ForgetPrefixes leaves it.

//go:embed lua/latency.lua
var luaLatency string

var scriptLatency = script(luaLatency)

var _ state.Latencies = (*Store)(nil)

// latencyRounds bounds the retries of a contribution whose stored epoch
// changed under it (another replica rebased): each retry follows a rebase,
// which happens every few minutes per worker and model.
const latencyRounds = 8

type latencyItem struct {
	c  state.LatencyContribution
	sh *shard
}

// AddLatency adds the contributions, one round trip per shard for all of
// them; a contribution whose stored stats have another epoch is rebased
// to it (latency.Config.Rebase) and sent again. Stats past latency's
// bound at this replica's clock are first rebased to now: read, rebased,
// and written back only if their epoch is still the one read. The memory
// store applies the same rule (addLatency). Contributions whose sums are
// not latency.Size long are dropped.
func (r *Store) AddLatency(ctx context.Context, cs []state.LatencyContribution) error {
	cfg := latency.DefaultConfig()
	now := time.Now()
	items := make([]latencyItem, 0, len(cs))
	for _, c := range cs {
		if len(c.Stats.Sums) == latency.Size {
			items = append(items, latencyItem{c: c, sh: r.shardOfWorker(ctx, c.Worker)})
		}
	}
	for round := 0; len(items) > 0; round++ {
		if round == latencyRounds {
			return fmt.Errorf("redis latency: %d contributions met a new epoch %d times", len(items), latencyRounds)
		}
		for i := range items {
			it := &items[i]
			// The contribution's epoch is the stored one it was fit from
			// (or, rebased, the one the store replied): past the bound, so
			// are the stored stats.
			if cfg.NeedsRebase(it.c.Stats, now) {
				if err := r.rebaseLatency(ctx, cfg, it, now); err != nil {
					return err
				}
				it.c.Stats = cfg.Rebase(it.c.Stats, now)
			}
		}
		groups := map[*shard][]int{}
		for i, it := range items {
			groups[it.sh] = append(groups[it.sh], i)
		}
		var retry []latencyItem
		for sh, idx := range groups {
			args := make([]any, 0, 5*len(idx))
			for _, i := range idx {
				c := items[i].c
				args = append(args, "add", c.Worker, c.Model, epochString(c.Stats.Epoch), packStats(c.Stats))
			}
			res, err := r.run(ctx, sh, scriptLatency, args...).StringSlice()
			if err != nil {
				return fmt.Errorf("redis latency: %w", err)
			}
			for k, i := range idx {
				if k >= len(res) || res[k] == "" {
					continue
				}
				it := items[i]
				it.c.Stats = cfg.Rebase(it.c.Stats, parseEpoch(res[k]))
				retry = append(retry, it)
			}
		}
		items = retry
	}
	return nil
}

// rebaseLatency rebases the item's stored stats to now if they are past the
// bound, unless another replica changed their epoch meanwhile.
func (r *Store) rebaseLatency(ctx context.Context, cfg latency.Config, it *latencyItem, now time.Time) error {
	v, err := r.client.HGet(ctx, it.sh.prefix+"lat:"+it.c.Worker, it.c.Model).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redis latency: %w", err)
	}
	st, err := unpackStats(v)
	if err != nil {
		return fmt.Errorf("redis latency of %s for %s: %w", it.c.Worker, it.c.Model, err)
	}
	if !cfg.NeedsRebase(st, now) {
		return nil
	}
	nst := cfg.Rebase(st, now)
	err = r.run(ctx, it.sh, scriptLatency, "set", it.c.Worker, it.c.Model, epochString(st.Epoch), packStats(nst)).Err()
	if err != nil {
		return fmt.Errorf("redis latency rebase: %w", err)
	}
	return nil
}

// parseLatency reads a worker's model → packed stats pairs; unreadable
// entries are left out.
func parseLatency(kvs [][2]string) map[string]latency.Stats {
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]latency.Stats, len(kvs))
	for _, kv := range kvs {
		if s, err := unpackStats(kv[1]); err == nil {
			out[kv[0]] = s
		}
	}
	return out
}

// epochString is an epoch as the store keeps it: Unix nanoseconds in
// decimal ("0": none).
func epochString(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func parseEpoch(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// packStats encodes s as latency.lua keeps it: a MessagePack array of the
// epoch string and the sums as float64.
func packStats(s latency.Stats) string {
	b := make([]byte, 0, 32+9*len(s.Sums))
	b = arrayHeader(b, 1+len(s.Sums))
	b = packString(b, epochString(s.Epoch))
	for _, v := range s.Sums {
		b = append(b, 0xcb)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	return string(b)
}

var errPacked = errors.New("malformed packed latency stats")

// unpackStats decodes what packStats wrote, or what Redis's cmsgpack
// re-encoded after an add: numbers may then be integers of any width or
// float32 where the value is exact in them.
func unpackStats(p string) (latency.Stats, error) {
	d := decoder{b: []byte(p)}
	n := d.arrayLen()
	if d.err != nil || n < 1 {
		return latency.Stats{}, errPacked
	}
	epoch := d.str()
	if n-1 > len(d.b) { // every number takes a byte at least
		return latency.Stats{}, errPacked
	}
	sums := make([]float64, 0, n-1)
	for range n - 1 {
		sums = append(sums, d.number())
	}
	if d.err != nil {
		return latency.Stats{}, d.err
	}
	return latency.Stats{Epoch: parseEpoch(epoch), Sums: sums}, nil
}
