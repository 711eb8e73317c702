package memory

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

var _ state.Latencies = (*Store)(nil)

// AddLatency adds each contribution to its worker's latency statistics
// for its model, under the store's lock (see state.Latencies and
// latency.go in state/redis, which does the same). Contributions for
// unknown workers, and those whose sums are not latency.Size long (another
// layout), are dropped.
func (m *Store) AddLatency(_ context.Context, cs []state.LatencyContribution) error {
	m.lock()
	defer m.unlock()
	now := m.now()
	cfg := latency.DefaultConfig()
	for _, c := range cs {
		w, ok := m.workers[c.Worker]
		if !ok || len(c.Stats.Sums) != latency.Size {
			continue
		}
		// A new map, never an update in place: snapshots share the old
		// one (Snapshot), and addLatency's sums are new slices too.
		next := make(map[string]latency.Stats, len(w.LatencyStats)+1)
		maps.Copy(next, w.LatencyStats)
		next[c.Model] = addLatency(cfg, w.LatencyStats[c.Model], c.Stats, now)
		w.LatencyStats = next
	}
	return nil
}

// addLatency is cur + s as a store applies it at now: whichever takes the
// epoch (cur, or s when cur is empty) is first rebased to now when its
// newest weight would pass latency's bound. The sums returned are new
// (latency.Config.Add copies), or cur's when s is empty: the store never
// writes into sums it holds.
func addLatency(cfg latency.Config, cur, s latency.Stats, now time.Time) latency.Stats {
	if len(cur.Sums) == 0 {
		if cfg.NeedsRebase(s, now) {
			s = cfg.Rebase(s, now)
		}
	} else if cfg.NeedsRebase(cur, now) {
		cur = cfg.Rebase(cur, now)
	}
	return cfg.Add(cur, s)
}

// cloneLatency copies a worker's statistics for a store seeded from a
// snapshot.
func cloneLatency(ls map[string]latency.Stats) map[string]latency.Stats {
	if ls == nil {
		return nil
	}
	out := make(map[string]latency.Stats, len(ls))
	for model, s := range ls {
		out[model] = latency.Stats{Epoch: s.Epoch, Sums: slices.Clone(s.Sums)}
	}
	return out
}
