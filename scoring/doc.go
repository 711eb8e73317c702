// Package scoring is the router's pure decision code: given a job and a view
// of the candidate workers, it filters them and turns each strategy into
// per-worker score curves. It performs no I/O and reads no clock; callers
// pass ages and random tie-break ranks in. Its only package state is the
// registry of strategies and terms (see Registries).
//
// # Why curves, not numbers
//
// The number a strategy computes for a worker depends on that worker's live
// in-flight count, and that count must be read in the same atomic step that
// claims the worker (otherwise concurrent requests all see the same idle
// "best" worker: the herd race). So a strategy does not return a number but a
// Curve: score(a) = (Base + Slope·a) · (1 + Mult·a), where a is the live
// in-flight count. Everything except a is computed here from a snapshot that
// may be slightly stale; the store evaluates the curves against the live
// counts, filters workers at their cap, and claims the minimum in one atomic
// step. Pick is the reference implementation of that evaluation; the Redis
// script mirrors it and a test keeps them equal.
//
// # The scored formula
//
//	score = active·active_count + Σ_t weight_t·value_t
//	        + prefix·prefix_miss + token_load·token_load_fraction
//
// lowest wins. Each weight is the configuration's scoring.weights.<key>;
// the defaults are stated once, in the configuration (internal/config,
// and the table in docs/configuration.md generated from it). The sum runs
// over the eligible workers E (serve the model, healthy or recovering,
// not draining; the cap is checked at claim time, and a recovering
// worker's is 1: it takes one probe request at a time).
//
// active is the worker's live in-flight requests through this router (all
// replicas), read inside the atomic claim. Not normalised: one more
// request always costs Weights.Active.
//
// The snapshot terms t are the ones registered with RegisterTerm, each in
// a file of its own (term_<name>.go) that holds its definition (Doc), the
// inputs it reads (Reads), its default weight and the one function
// computing it; Terms lists them, in the order the breakdown shows them.
// The product registers:
//
//   - queue (term_queue.go): requests waiting inside the worker, as it
//     reports them. Not normalised.
//   - norm_latency (term_norm_latency.go) = latency_w / max_{e∈E, known}
//     latency_e, in [0,1], where latency is the moving average of
//     end-to-end request latency.
//   - norm_job_cost (term_norm_job_cost.go) = cost_w / (cost_w +
//     JobCostScale), in [0,1), where cost_w = ttft_w + out_est /
//     tokens_per_second_w is the expected service time of this job on w in
//     seconds, out_est = 0.5·max_tokens (or DefaultOutputTokens when the
//     client sent none). A saturating form rather than division by the
//     maximum, so that it grows with the job's size: a long job pays more
//     for a slow worker than a short one. Unknown when the worker has no
//     tokens/s average.
//   - norm_throughput (term_norm_throughput.go) = tps_w / max_{e∈E, known}
//     tps_e, in [0,1] (tokens/s moving average). Subtracted: its weight
//     enters the breakdown negated.
//   - node_distance (term_node_distance.go): 0 same zone, 0.5 same region
//     but another zone, 1 another region; 0 when either side's locality is
//     unset.
//   - kv_pressure (term_kv_pressure.go): the worker's KV-cache usage
//     fraction in [0,1], scraped.
//   - gpu_util (term_gpu_util.go): GPU utilisation fraction in [0,1] from a
//     DCGM exporter (DCGM_FI_DEV_GPU_UTIL / 100), when the worker names one.
//
// Each file's Reads names the metric every engine reports it under.
//
// Two more terms are read live, like active, because they change with every
// claim on any replica: the store evaluates them inside the atomic claim
// and adds them to the curve's value, score += prefix·prefix_miss +
// token_load·token_load. Each is a weight times coefficients of one linear
// form over the live figures (LiveWeights, LiveScore: miss·(1 − trust·m/n)
// + prefill·p + decode·d + uncached·u(m)); prefix_miss has miss 1,
// token_load 1/(kv_blocks·16) on each of p, d and u. Where:
//
//   - prefix_miss = 1 − match/blocks, in [0,1]: match is how many leading
//     16-token blocks of the prompt (chained hashes, scoring/prefix) the
//     worker's prefix index holds, blocks how many the claim looked up
//     (bounded by scoring.max_prefix_blocks). The index is routing history
//     shared by every replica: the blocks of the prompts claimed on the
//     worker, least recently used evicted beyond its kv_blocks, found to
//     within 4 blocks (the index keeps every 4th block's chained hash). No
//     blocks (a prompt under one block) → the term is absent for every
//     worker.
//     Load guard ("sticky until saturated"): when the worker's in-flight
//     prefill plus this request's uncached tokens exceed ttft_slo × its
//     prefill rate, its match counts as 0 (prefill_guard = 1 in the record).
//   - token_load = (prefill + decode + uncached) / (kv_blocks·16), where
//     prefill and decode are the worker's in-flight tokens (all replicas:
//     each claim holds its uncached prompt tokens and max_tokens, or
//     DefaultOutputTokens, until it ends) and uncached = prompt_tokens −
//     16·match (the request's own prefill there). Not bounded by 1.
//
// A claim's prefill tokens count until the claim ends, not until its first
// token: dropping them then would cost a third store round trip per
// request. So "in-flight prefill" also counts requests already decoding,
// and the guard errs towards leaving a busy warm worker early.
//
// prefix_match (the raw matched fraction, weight 0) is recorded beside
// them. Setting both weights to 0 skips the index and the token counts
// altogether.
//
// Moving averages (latency, TTFT, tokens/s) older than Params.Staleness
// count as unknown, like scraped values older than their bound (the
// scheduler applies that one).
//
// A term whose signal is unknown (never measured, or older than its staleness
// bound) contributes 0 and is listed as unknown in the breakdown, so a
// missing metric is visible rather than silently read as "idle".
//
// # The predicted strategy
//
// predicted (strategy_predicted.go) scores a worker by the request's
// predicted completion time there, TTFT + output·TPOT, in seconds, from
// the worker's latency model (scoring/latency, fitted by the scheduler at
// every snapshot from what the worker's requests measured): the TTFT's
// prefill and prefix parts are live terms (ttft_ahead, ttft_prefill,
// ttft_running_prefill: coefficients of Live.Ahead and the uncached
// prompt), the rest is the curve. Its ceiling enforces the request's
// objectives (Job.Objectives) inside the claim. predicted_ttft and
// predicted_tpot (weight 0) record the snapshot's predictions.
//
// # LoRA adapters
//
// A job naming an adapter (Job.Adapter) is eligible on workers serving its
// base model that serve the adapter (Worker.ServesAdapter), and every
// strategy's candidates get AdapterWeights (adapter.go): the adapter term
// (weight 1) is AdapterScore of the adapter's state on the worker, read by
// the store inside the claim: 0 active, Idle, Load (a free slot) or
// Load + Evict. For predicted they are seconds (the worker's load time);
// for the other strategies, tiers above their own ranking. The price does
// not depend on the prefix match, so the store adds it to the curve.
//
// # Registries
//
// Strategies are built by name from a registry as well (RegisterStrategy,
// New): scoring registers the product's own; the benchmark's emulations of
// other schedulers (scoring/emulate) register only in the binary that links
// them, llm-bench. The registries are the package's only state, written at
// init and read when a strategy is built, never during a decision.
// docs/extending.md is the checklist for adding a strategy or a term.
//
// Ties are broken by caller-supplied random ranks, never by list order.
package scoring
