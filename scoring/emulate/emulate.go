// Package emulate holds the benchmark's emulations of other routers'
// cache-aware schedulers, so that llm-router can be compared with them on
// the same GPUs and the same traces. None of them is on the product's
// default path: only the benchmark links this package, which registers them
// with scoring (scoring.RegisterStrategy), and the product's own strategies
// live in package scoring.
//
// Each emulation is a scoring.Strategy that also keeps what the scheduler
// it emulates keeps per router replica: a prefix index fed by its own
// routing decisions (or, for llm-d's precise profile, by the engines' KV
// events, which its caller delivers), and per-worker counts of the
// requests it routed and that have not finished. The scheduler feeds that state through
// Claimed(id, job, worker, now) after each successful claim and
// Released(id, now) when the claim is released. Like the originals, each
// router replica has its own state; nothing is shared between replicas.
//
// The package is pure like scoring: no I/O, no clock (time is passed in),
// no globals. Every instance is safe for concurrent use.
//
// # How a choice reaches the store
//
// An emulation's decision is expressed as candidate curves with Base = its
// cost (lower is better; a score to maximise is negated) and Slope = Mult =
// 0: the store's atomic claim then takes the emulation's pick among the
// candidates below their cap, and the next best when that one is full. The
// benchmark runs the emulations uncapped, as their originals have no cap.
// Candidates arrive in a random order and equal costs go to the lower
// index, which is a random tie-break. Each candidate's Terms carry the
// emulation's parts (prefix match, load, cost parts), weighted so that the
// contributions add up to the cost (Base), or to the score (−Base) for the
// emulation that maximises one, so the decision log shows the numbers the
// choice was made on.
//
// # What is emulated
//
// Prompts are compared by the chained 16-token block hashes of
// scoring/prefix (scoring.Job.Blocks), or by the 64-token blocks llm-d's
// approximate index hashes, derived from them (approx.go): characters are estimated at four a
// token, as the Gateway API Inference Extension does, while SGLang's router
// matches characters and Dynamo tokens. Where that or anything else is
// simplified, the emulation says so in its own comments.
package emulate

import (
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/prefix"
)

// Names of the emulations, for the strategy key.
const (
	// QueueKVMaxScore emulates the Gateway API Inference Extension's
	// default scheduler (queue and KV utilisation, 2:2, max score).
	QueueKVMaxScore = "queue_kv_max_score"
	// PrefixQueueKVMaxScore emulates the Gateway API Inference Extension /
	// llm-d default profile with the approximate prefix-cache scorer.
	PrefixQueueKVMaxScore = "prefix_queue_kv_max_score"
	// PrefixMatchOrShortestQueue emulates the SGLang router's cache_aware
	// policy.
	PrefixMatchOrShortestQueue = "prefix_match_or_shortest_queue"
	// PrefixOverlapMinCost emulates NVIDIA Dynamo's KV router in its
	// approximate mode (no KV events).
	PrefixOverlapMinCost = "prefix_overlap_min_cost"
	// PrefixAffinityTokenLoad emulates llm-d's current default profile:
	// the prefix-affinity filter at 0.80 and the token-load scorer
	// ("sticky until saturated") on the approximate index.
	PrefixAffinityTokenLoad = "prefix_affinity_token_load"
	// PrecisePrefixQueueKVMaxScore emulates llm-d's precise prefix-cache
	// profile, fed by the engines' KV events (PrecisePrefix). Only the
	// fleet simulator has the events: it registers this name, not this
	// package.
	PrecisePrefixQueueKVMaxScore = "precise_prefix_queue_kv_max_score"
)

// Names lists every emulation; each is registered with scoring (the
// strategy key accepts it) in binaries that link this package.
func Names() []string {
	return append([]string{QueueKVMaxScore}, PrefixNames()...)
}

// SimulatorOnly lists the emulations only the fleet simulator registers
// and runs: llm-d's precise profile and the GIE's LoRA-affinity scheduler
// read what only the simulator feeds them (engine KV events, LoRA
// figures), and Envoy's LEAST_REQUEST is measured on the real Envoy
// elsewhere. Benchmarks of the real stack leave them out.
func SimulatorOnly() []string {
	return []string{PrecisePrefixQueueKVMaxScore, LoRAQueueKVMaxScore, LeastRequestP2C}
}

// PrefixNames lists the prefix-aware emulations: each keeps per-replica
// state (its own index) fed by the claims it observes.
func PrefixNames() []string {
	return []string{PrefixQueueKVMaxScore, PrefixMatchOrShortestQueue, PrefixOverlapMinCost, PrefixAffinityTokenLoad}
}

// The emulations register with scoring when a binary links this package:
// llm-bench does, llm-router does not, so only the benchmark's routers
// accept these names (see docs/benchmark.md). Each scheduler gets a fresh
// instance with empty state and the upstream defaults; the product's
// Params do not apply to them.
func init() {
	scoring.RegisterStrategy(QueueKVMaxScore, func(scoring.Params) scoring.Strategy { return queueKVMaxScore{} })
	scoring.RegisterStrategy(PrefixQueueKVMaxScore, func(scoring.Params) scoring.Strategy { return newPrefixQueueKV() })
	scoring.RegisterStrategy(PrefixMatchOrShortestQueue, func(scoring.Params) scoring.Strategy { return newPrefixMatchOrShortestQueue() })
	scoring.RegisterStrategy(PrefixOverlapMinCost, func(scoring.Params) scoring.Strategy { return newPrefixOverlapMinCost() })
	scoring.RegisterStrategy(PrefixAffinityTokenLoad, func(scoring.Params) scoring.Strategy { return newPrefixAffinityTokenLoad() })
}

// Every emulation places LoRA adapters by its original's rules (the
// LoRA-affinity emulation) or not at all, never by the product's adapter
// prices.
var (
	_ scoring.AdapterBlind = queueKVMaxScore{}
	_ scoring.AdapterBlind = (*prefixQueueKV)(nil)
	_ scoring.AdapterBlind = (*prefixMatchOrShortestQueue)(nil)
	_ scoring.AdapterBlind = (*prefixOverlapMinCost)(nil)
	_ scoring.AdapterBlind = (*prefixAffinityTokenLoad)(nil)
	_ scoring.AdapterBlind = (*PrecisePrefix)(nil)
	_ scoring.AdapterBlind = (*LoRAAffinity)(nil)
	_ scoring.AdapterBlind = (*leastRequestP2C)(nil)
)

func (queueKVMaxScore) AdapterBlind()             {}
func (*prefixQueueKV) AdapterBlind()              {}
func (*prefixMatchOrShortestQueue) AdapterBlind() {}
func (*prefixOverlapMinCost) AdapterBlind()       {}
func (*prefixAffinityTokenLoad) AdapterBlind()    {}
func (*PrecisePrefix) AdapterBlind()              {}
func (*LoRAAffinity) AdapterBlind()               {}
func (*leastRequestP2C) AdapterBlind()            {}

// blockTokens is the block size every emulation works in: vLLM's default,
// and the size scoring/prefix hashes.
const blockTokens = prefix.BlockTokens

// leading is the number of leading blocks of blocks for which has is true:
// with chained hashes, the length of the cached prefix.
func leading(blocks []uint64, has func(uint64) bool) int {
	for i, b := range blocks {
		if !has(b) {
			return i
		}
	}
	return len(blocks)
}

// nanos is t as a comparable integer; the zero time is 0, so state built
// without a clock still orders sensibly.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
