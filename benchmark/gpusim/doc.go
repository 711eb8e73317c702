// Package gpusim simulates GPU inference servers for demos, end-to-end tests
// and benchmarks. A simulated GPU speaks the OpenAI and llama.cpp HTTP APIs
// and exposes vLLM, SGLang, llama.cpp or TensorRT-LLM metrics that reflect
// its real simulated state: the queue, the running batch and the KV cache.
//
// # Timing models
//
// Simple mode (no --profile): each request gets its first token
// --ttft-ms after admission, then --tokens-per-second tokens per second,
// independently of the others. --max-concurrency bounds the requests
// generating at once (the rest wait FIFO; 0 = unlimited). KV usage is the
// context tokens of the running requests over the nominal capacity
// --kv-capacity-tokens; it limits nothing and saturates at 1.
// --ttft-ms 0 --tokens-per-second 0 is instant: every token at once.
//
// Calibrated mode (--profile h100-llama2-7b|a100-llama3-8b|a40-llama2-7b)
// is continuous batching with chunked prefill as in vLLM V1. One scheduler
// loop per GPU runs forward passes: each takes the running sequences (one
// token per decode, a chunk per prefill), then admits waiting ones while
// --max-num-seqs, the --max-batched-tokens budget and the KV cache allow.
// A pass lasts the profiled linear-layer time for its tokens (vidur operator
// profiles, interpolated), plus the time to read its sequences' KV cache
// from HBM, plus the host's CPU time around every step (3 ms plus 40 µs a
// sequence: scheduling, input tensors, sampling, detokenisation; it brings
// one A100 on the Azure conversation trace to within 10 % of the published
// 6.45 req/s). The KV cache is paged in blocks of 16 tokens, sized from the
// GPU's memory, --gpu-mem-util, the weights and an activation reserve, and
// never over-committed: when a decode needs a block and none is free, the
// newest running request is preempted by recompute and re-queued at the
// front.
//
// --slowdown K multiplies every simulated duration by K from the start (the
// /admin/config knob of the same name changes it later): a benchmark runs a
// fleet K times slower so that the machine driving it does not saturate.
//
// llama.cpp mode (--slots N, with either timing): N slots of --ctx-size
// tokens each; requests beyond the slots wait and count as deferred; no
// preemption.
//
// The engine takes time as a parameter, so the same code runs in real time
// (the server: one timer per step per GPU) and in virtual time (Simulate:
// the clock jumps from step to step; FindSaturation replays a trace).
//
// # Prefix caching
//
// With --prefix-cache (the default; --prefix-cache=false restores the
// engine without one exactly), a GPU caches prompt blocks across requests
// as vLLM's automatic prefix caching does. A request's blocks are the
// chained hashes of scoring/prefix, computed while parsing its body: the
// raw JSON of each chat message's "role" then "content", in order, or the
// raw JSON of "prompt", 16 tokens of 4 bytes a block. Only full blocks are
// cached, and the last prompt token is always recomputed, so at most
// (prompt tokens - 1) / 16 blocks can hit (CacheableBlocks).
//
// Calibrated mode: the paged KV cache registers each full prompt block
// once computed; sequences starting with the same blocks share them by
// reference count. On admission (first or after a preemption) a sequence
// takes the longest run of its leading blocks that is cached, held by
// others or free, and prefills only the rest: cached tokens are attention
// context, not prefill work. Blocks nobody holds stay cached, freed
// last-block-first onto an LRU list, and are evicted only when allocation
// finds no empty block. Cached blocks are GPU memory within the capacity
// the profile derives; KV usage counts the blocks held (ref > 0), as
// vLLM's. Two sequences computing the same block at once keep two copies;
// the cache registers the first.
//
// Simple mode: an LRU cache of blocks (the PrefixCache model) sized to
// --kv-capacity-tokens / 16 blocks less the running requests' context. A
// prompt's blocks are looked up and cached at admission, and the first
// token comes after --ttft-ms × uncached / prompt tokens.
//
// Prefix cache queries and hits are counted in tokens, once per request at
// its first admission (a preempted request's re-admission is not counted
// again): the prompt tokens are queried, the cached tokens hit. /metrics
// shows them as vLLM does, per model: vllm:prefix_cache_queries_total and
// vllm:prefix_cache_hits_total (vllm-v1), their earlier names
// vllm:gpu_prefix_cache_queries_total and _hits_total (vllm-legacy), or
// both (vllm); as the hit ratio since start for SGLang
// (sglang:cache_hit_rate) and TensorRT-LLM (trtllm_kv_cache_hit_rate);
// llama.cpp has no such metric. llama.cpp slots mode has no prefix cache.
// The vLLM formats also show the cache size as vLLM does,
// vllm:cache_config_info{block_size="16",num_gpu_blocks=...}, and the
// server's process_start_time_seconds, by which a scraper tells a restart.
// Their latency histograms are vLLM's: time to first token, end to end,
// and the gaps between a request's consecutive tokens in engine time
// (vllm:inter_token_latency_seconds in vllm-v1, the older
// vllm:time_per_output_token_seconds in vllm-legacy, both in vllm; in
// vLLM's buckets, with an edge at the benchmark's 100 ms SLO). In simple
// mode a step's n tokens share its gap evenly.
//
// Offline, Simulate and FindSaturation replay the cache when SimRequests
// carry their Blocks. PrefixCache is the lookup alone, for a trace's
// ceiling hit rate. LoadMooncake reads the Mooncake trace; a MooncakeRow's
// Prompt is deterministic text per 512-token hash id (equal ids, equal
// text) and its BlockHashes those the server derives from a chat request
// carrying that prompt as its one user message.
//
// # LoRA adapters
//
// --max-loras N (N > 0) serves LoRA adapters of the first --model as vLLM
// with --enable-lora does: a request names an adapter as its model, and N
// GPU slots hold the adapters batches may use. --lora-modules name=path,...
// registers adapters from the start; POST /v1/load_lora_adapter
// {"lora_name","lora_path"} registers one at run time (only paths listed in
// --lora-available, when given; others answer 404 "No adapter found"), and
// POST /v1/unload_lora_adapter {"lora_name"} removes one, with vLLM's
// plain-text success lines and its error bodies and statuses (400
// InvalidUserInput for a missing field or a name already loaded, 404
// NotFoundError for an unknown one). /v1/models lists each adapter with
// its path as root and the base model as parent.
//
// The scheduler admits a waiting request only while its adapter is
// resident or the adapters of the running batch leave a slot; otherwise it
// skips the request, which keeps its place, as vLLM's does. An adapter
// enters a slot at the admission of its first request, evicting the least
// recently used resident adapter that has no running request (one with
// running requests is never evicted), and its --lora-load-ms (default 100,
// an assumption: no published figure fits every setup) is added to the
// forward pass that first uses it, delaying the whole batch as vLLM's
// synchronous activation does; in simple mode it delays only that
// adapter's first tokens. Prefix-cache blocks are keyed by adapter, as
// vLLM's block hashes include the LoRA id. The vLLM formats expose
// vllm:lora_requests_info{max_lora,running_lora_adapters,
// waiting_lora_adapters} (adapters with requests running and waiting,
// comma-separated; value: the time of the scrape), and /admin/state the
// slots, the registered adapters and the loads since start.
//
// # Prefill/decode disaggregation
//
// --kv-link-gbps G gives a GPU a KV connector, as vLLM's NIXL connector
// (kv_role kv_both: any GPU prefills for others or decodes). A request
// whose kv_transfer_params has "do_remote_decode": true (a routing
// sidecar's prefill request, max_tokens 1, not streamed) is served as
// usual and its response carries kv_transfer_params with
// "do_remote_prefill": true, the GPU's id as remote_engine_id, the
// host and port it was reached on, and one block id per 16 prompt tokens.
// A request carrying those params ("do_remote_prefill": true) loads its
// prompt's KV instead of computing it: its blocks are reserved at
// admission (sharing the prefix its own cache holds), the tokens its cache
// lacks, all but the last, come over the link at G Gbit/s (KV bytes per
// token from the profile, or --kv-bytes-per-token in simple mode; loads
// queue one behind the other on the link), and then one step computes the
// last prompt token and emits the first. A load holds its blocks but takes
// no part in the steps running beside it. When the prefill GPU named does
// not accept a connection, the transfer counts as failed and the prompt
// is prefilled locally, as vLLM recomputes a KV it cannot read; a
// preempted request also recomputes. The prefill GPU frees the request's
// blocks when it ends (they stay in its prefix cache) rather than holding
// them until read. Streamed prefill-only requests carry no params. The
// vLLM formats then show vllm:nixl_xfer_time_seconds and
// vllm:nixl_bytes_transferred (histograms in vLLM's buckets, per load) and
// vllm:nixl_num_failed_transfers_total. Without a connector
// kv_transfer_params are ignored, as by vLLM. In virtual time a
// SimRequest's RemotePrefill asks for the load.
//
// # HTTP API (per GPU)
//
//	POST /v1/chat/completions, /v1/completions   OpenAI, streamed (SSE) or not
//	POST /completion                             llama.cpp native
//	GET  /v1/models, /health, /metrics
//	POST /v1/load_lora_adapter, /v1/unload_lora_adapter  with --max-loras
//	GET  /slots, /props                          with --slots
//	GET|POST /admin/config                       slowdown, error_rate, ttft_ms, tokens_per_second
//	GET  /admin/state                            running, waiting, KV, preemptions, completed, served_total,
//	                                             prefix_cache_queries, prefix_cache_hits (tokens), cached_blocks, lora
//
// Every response carries x-gpusim-id, and x-gpusim-traceparent echoes a
// request's W3C traceparent. A request generates exactly
// max_tokens (or max_completion_tokens, or llama.cpp's n_predict) tokens,
// 16 when unset, at most 8192; the prompt length is characters / 4 unless
// the body sets "gpusim_prompt_tokens". A body may also give the true
// output length, "gpusim_output_tokens", as a trace knows it: the request
// then generates that many tokens and finishes with "stop", unless the
// limit above is smaller, when it generates the limit and finishes with
// "length". The KV fit check uses the tokens really generated. A client
// that disconnects frees its slot and KV at once.
//
// # Stream summary
//
// --stream-summary (fleet key stream_summary) makes streams cheap for a
// benchmark replaying 100k+ requests on a few cores, where per-token SSE
// events through Envoy would dominate the CPU. A streamed response sends
// the first token's event as soon as it is generated, then nothing until
// the request finishes, when one event carries the other tokens' text,
// followed by the finish chunk, the usage chunk (sent even without
// include_usage) and [DONE]. The usage chunk (llama.cpp: the final chunk)
// carries "gpusim_itl_us": the engine-clock gaps in microseconds between
// consecutive tokens of the request, one fewer than the tokens.
//
// # Faults
//
// --error-rate answers that fraction of inference requests 503;
// --loading-ms answers /health and inference 503 "Loading model" for that
// long after start; --exit-after N stops the GPU's listener once N inference
// responses are fully written (requests past the Nth get their connection
// closed), and the process exits when every GPU has stopped. /admin/config
// changes slowdown and error rate at run time.
//
// # Fleet file
//
// gpusim --fleet FILE serves several GPUs from one process, one listener
// each. The file is a YAML list; each entry takes the flag names with
// underscores, and flags given on the command line are defaults for every
// entry. An entry without a seed gets --seed plus its index.
//
//   - id: gpu-a               # default: listen
//     listen: 127.0.0.1:8001  # required
//     models: [llama-3-8b]    # required
//     profile: a100-llama3-8b # omit for simple mode
//     max_num_seqs: 256
//     max_batched_tokens: 512
//     gpu_mem_util: 0.9
//     prefix_cache: true      # false: no prefix caching
//     metrics_format: vllm    # vllm|vllm-legacy|vllm-v1|sglang|llamacpp|trtllm
//     slowdown: 1             # every simulated duration times this
//     stream_summary: false   # true: first token, then the rest at once
//     max_loras: 4            # >0: LoRA adapters of the first model
//     lora_modules: [sql=/lora/sql, chat]
//     lora_available: [/lora/extra] # what a run-time load finds (empty: any)
//     lora_load_ms: 100
//     kv_link_gbps: 0         # >0: KV connector for prefill/decode disaggregation
//     kv_bytes_per_token: 131072  # simple mode: KV size of one token
//   - id: gpu-b
//     listen: 127.0.0.1:8002
//     models: [llama-3-8b]
//     tokens_per_second: 30   # simple mode
//     ttft_ms: 80
//     max_concurrency: 8
//     kv_capacity_tokens: 65536
//     slots: 0                # >0: llama.cpp slots of ctx_size tokens
//     ctx_size: 4096
//     error_rate: 0.1
//     exit_after: 0
//     loading_ms: 0
//     seed: 7
//
// testdata/fleet-example.yaml is a complete example.
package gpusim
