package compare

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// seedCapacities gives every seed its own capacity, so that "80 % load"
// means the same thing for each seed's requests. Seeds draw different
// windows of the trace, and one window's requests can need much more GPU
// time than another's (longer prompts, longer outputs): at one fixed rate
// one seed would be idle and another overloaded. A seed's fleet estimate is
// the sum of every GPU's saturation rate alone on the seed's requests,
// found by gpusim in virtual time: with measured 0 it is the seed's
// capacity; otherwise measured is the first seed's capacity from real
// runs, and each other seed's is it times the ratio of the estimates.
func seedCapacities(w *loadgen.Workload, gpus []fleet.GPU, o Options, measured float64) (map[uint64]float64, error) {
	out := map[uint64]float64{}
	var first float64
	for i, seed := range o.Seeds {
		est, err := fleetSaturation(gpus, simRequests(w, w.Jobs(o.Requests, 1, seed)), o.FleetExtra)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		if i == 0 {
			first = est
		}
		switch {
		case measured <= 0:
			out[seed] = est
		case first > 0:
			out[seed] = measured * est / first
		default:
			out[seed] = measured
		}
		logf(o.Log, "seed %d: fleet estimate %.2f req/s (virtual time), capacity %.2f req/s", seed, est, out[seed])
	}
	return out, nil
}

// fleetSaturation is the sum of the GPUs' saturation rates alone on reqs.
func fleetSaturation(gpus []fleet.GPU, reqs []gpusim.SimRequest, extra map[string]any) (float64, error) {
	done := map[string]float64{}
	sum := 0.0
	for _, g := range gpus {
		v, ok := done[g.Profile]
		if !ok {
			cfg, err := sizingConfig(g.Profile, extra)
			if err != nil {
				return 0, err
			}
			sat, err := saturation(cfg, reqs)
			if err != nil {
				return 0, err
			}
			v = sat.SaturationRate
			done[g.Profile] = v
		}
		sum += v
	}
	return sum, nil
}

// simRequests turns jobs into gpusim's virtual-time requests, with their
// prompts' block hashes when the trace has prefix ids.
func simRequests(w *loadgen.Workload, jobs []loadgen.Job) []gpusim.SimRequest {
	reqs := make([]gpusim.SimRequest, len(jobs))
	for i, j := range jobs {
		reqs[i] = gpusim.SimRequest{Arrival: j.At, PromptTokens: j.Prompt, OutputTokens: j.Output}
		if w != nil && w.Prefixed() {
			reqs[i].Blocks = loadgen.BlockHashes(j, w.BlockTokens())
		}
	}
	return reqs
}

// prefixCeilings computes the Ceilings of o's runs.
func prefixCeilings(w *loadgen.Workload, gpus []fleet.GPU, o Options) *report.Ceilings {
	c := &report.Ceilings{Unbounded: map[uint64]float64{}, Fleet: map[uint64]float64{}, Pooled: map[uint64]float64{}}
	c.Trace = unboundedHitRate(w, w.AllJobs())
	for _, seed := range o.Seeds {
		jobs := w.Jobs(o.Requests, 1, seed)
		c.Unbounded[seed] = unboundedHitRate(w, jobs)
		c.Fleet[seed] = fleetHitRate(w, gpus, jobs, o.FleetExtra, false)
		c.Pooled[seed] = fleetHitRate(w, gpus, jobs, o.FleetExtra, true)
	}
	return c
}

func unboundedHitRate(w *loadgen.Workload, jobs []loadgen.Job) float64 {
	cache := gpusim.NewPrefixCache(0)
	for _, j := range jobs {
		cache.Access(loadgen.BlockHashes(j, w.BlockTokens()), j.Prompt)
	}
	return cache.HitRate()
}

// fleetHitRate replays jobs on the fleet's caches (Ceilings.Fleet), or
// on one cache of their total size when pooled (Ceilings.Pooled).
func fleetHitRate(w *loadgen.Workload, gpus []fleet.GPU, jobs []loadgen.Job, extra map[string]any, pooled bool) float64 {
	sizes := make([]int, len(gpus))
	for i, g := range gpus {
		cfg, err := sizingConfig(g.Profile, extra)
		if err != nil {
			return 0
		}
		prof, err := gpusim.LookupProfile(cfg.Profile)
		if err != nil {
			return 0
		}
		sizes[i] = prof.KVCapacityBlocks(cfg.GPUMemUtil)
	}
	if pooled {
		total := 0
		for _, n := range sizes {
			total += n
		}
		sizes = []int{total}
	}
	caches := make([]*gpusim.PrefixCache, len(sizes))
	for i, n := range sizes {
		caches[i] = gpusim.NewPrefixCache(n)
	}
	sent := make([]int, len(caches))
	var queries, hits int
	for _, j := range jobs {
		b := loadgen.BlockHashes(j, w.BlockTokens())
		best, bestMatch := 0, -1
		for i, c := range caches {
			m := c.Match(b)
			if m > bestMatch || m == bestMatch && sent[i] < sent[best] {
				best, bestMatch = i, m
			}
		}
		sent[best]++
		hits += caches[best].Access(b, j.Prompt)
		queries += j.Prompt
	}
	if queries == 0 {
		return 0
	}
	return float64(hits) / float64(queries)
}

// overloaded names the (load, seed) pairs at which no configuration kept
// up with the offered rate: none of them finished every measured request
// within the grace, with under 1 % errors and its median TTFT within the
// capacity bound (Options.CapacityTTFT), as a sustainable capacity
// probe does. There the arrivals were more than
// the fleet could serve however they were placed, so every
// configuration's figures say more about the overload than about
// scheduling, and the pair leaves the tables.
//
// Why every configuration and not one: the rule was "the capacity setup
// (Envoy LEAST_REQUEST) fell behind, or any setup left a measured request
// unfinished". On a trace with prefix reuse the fleet's capacity depends
// on its cache hit rate, and so on the scheduler: a cache-blind setup can
// drown at a rate a cache-aware one serves with every request on time.
// That rule then named seeds overload that the best configurations had
// served at full goodput, and dropped them, with the figures that showed
// the difference. A setup that falls behind where another keeps up is
// losing by its scheduling, which is what the comparison measures.
func overloaded(runs []*report.Run, o Options) []string {
	var pairs []string
	kept := map[string]bool{}
	for _, r := range runs {
		key := report.OverloadKey(r.Summary.Load, r.Seed)
		if !slices.Contains(pairs, key) {
			pairs = append(pairs, key)
		}
		if keptUp(r.Summary, o.CapacityTTFT) {
			kept[key] = true
		}
	}
	var out []string
	for _, key := range pairs {
		if !kept[key] {
			out = append(out, key)
		}
	}
	return out
}

// keptUp reports whether a run served its arrivals: every measured request
// finished, under 1 % failed, and the median TTFT stayed within bound.
func keptUp(s stats.Summary, bound time.Duration) bool {
	return len(s.LowerBounds) == 0 && s.OK > 0 && s.ErrorRate < 0.01 && stats.MsDuration(s.TTFTP50) <= bound
}

// pooledStats computes every setup's Stats at every load over the seeds
// that were not overloaded there.
func pooledStats(runs []*report.Run, measured [2]int, o Options, overload []string) []stats.Stats {
	var out []stats.Stats
	rng := rand.New(rand.NewPCG(7, 11))
	for _, load := range o.Loads {
		for _, s := range o.Setups {
			var strata [][]loadgen.Result
			st := stats.Stats{Setup: s.Name, Load: load}
			var hits []float64
			thr := 0.0
			for _, r := range runs {
				if r.Summary.Setup != s.Name || r.Summary.Load != load || slices.Contains(overload, report.OverloadKey(load, r.Seed)) {
					continue
				}
				strata = append(strata, r.Results[measured[0]:measured[1]])
				st.Seeds = append(st.Seeds, r.Seed)
				hits = append(hits, r.HitRate)
				thr += r.Summary.Throughput
			}
			if len(strata) == 0 {
				out = append(out, st)
				continue
			}
			b := stats.Bootstrap(strata, o.SLO, rng)
			b.Setup, b.Load, b.Seeds = s.Name, load, st.Seeds
			b.HitRate = stats.Estimate{Seeds: hits}
			for _, h := range hits {
				b.HitRate.Value += h / float64(len(hits))
			}
			b.HitRate.Lo, b.HitRate.Hi = slices.Min(hits), slices.Max(hits)
			b.Throughput = thr / float64(len(strata))
			out = append(out, b)
		}
	}
	return out
}
