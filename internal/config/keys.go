package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// Key documents one configuration key: its YAML path, its environment
// variable (if any), its default and what it does. Env, when set, overrides
// the file.
type Key struct {
	Path    string
	Env     string
	Default string
	Doc     string
	apply   func(c *Config, v string) error
}

// Keys lists every configuration key. docs/configuration.md's table is generated from
// it (TestConfigReferenceDocumentsEveryKey keeps them equal). The snapshot
// terms' weights are listed from scoring's registry (termKeys).
var Keys = slices.Concat([]Key{
	{Path: "extproc_listen", Env: "EXTPROC_LISTEN", Default: "127.0.0.1:9002", Doc: "ext_proc gRPC listener (with the standard gRPC health service)", apply: setString(func(c *Config) *string { return &c.ExtProcListen })},
	{Path: "admin_listen", Env: "ADMIN_LISTEN", Default: "127.0.0.1:9090", Doc: "admin HTTP listener: /health, /stats, /metrics", apply: setString(func(c *Config) *string { return &c.AdminListen })},
	{Path: "strategy", Env: "ROUTING_STRATEGY", Default: "predicted", Doc: "predicted (placement and admission by each worker's learned latency model against the request's objectives, with concurrency limits derived from the model: docs/latency-model.md), scored, round_robin, least_loaded, latency_based or inference_aware: the strategies registered in llm-router (docs/extending.md adds one). The benchmark's routers (llm-bench serve) also accept its emulations of other schedulers (docs/benchmark.md)", apply: setString(func(c *Config) *string { return &c.Strategy })},
	{Path: "log_level", Env: "LOG_LEVEL", Default: "info", Doc: "debug, info, warn or error", apply: setString(func(c *Config) *string { return &c.LogLevel })},
	{Path: "replica_id", Env: "REPLICA_ID", Default: "hostname-pid", Doc: "this replica's name in claims, logs and /health", apply: setString(func(c *Config) *string { return &c.ReplicaID })},
	{Path: "max_body_bytes", Env: "MAX_BODY_BYTES", Default: "4194304", Doc: "largest request body accepted; larger gets 413", apply: setInt64(func(c *Config) *int64 { return &c.MaxBodyBytes })},
	{Path: "shutdown_grace", Env: "SHUTDOWN_GRACE_SECONDS", Default: "30s", Doc: "how long open ext_proc streams may finish after SIGTERM", apply: setDuration(func(c *Config) *Duration { return &c.ShutdownGrace })},
	{Path: "shutdown_delay", Env: "SHUTDOWN_DELAY_SECONDS", Default: "1s", Doc: "after SIGTERM, how long to keep serving with health NOT_SERVING before refusing new requests; above the rendered Envoy's detection time (2 failed checks 250ms apart), so that no request meets a replica that refuses it. In Kubernetes, also above the endpoint propagation time", apply: setDuration(func(c *Config) *Duration { return &c.ShutdownDelay })},
	{Path: "ema_alpha", Env: "EMA_ALPHA", Default: strconv.FormatFloat(scheduler.DefaultEMAAlpha, 'g', -1, 64), Doc: "smoothing of the latency, TTFT and tokens/s moving averages", apply: setFloat(func(c *Config) *float64 { return &c.EMAAlpha })},
	{Path: "decision_log_size", Env: "DECISION_LOG_SIZE", Default: "10000", Doc: "decisions kept for explain", apply: setInt(func(c *Config) *int { return &c.DecisionLogSize })},
	{Path: "decision_log_candidates", Env: "DECISION_LOG_CANDIDATES", Default: "8", Doc: "candidates written in each decision's log line, the best by total (explain has them all); 0 writes all", apply: setInt(func(c *Config) *int { return &c.DecisionLogCandidates })},
	{Path: "refresh_interval", Env: "REFRESH_INTERVAL_SECONDS", Default: scheduler.DefaultRefreshInterval.String(), Doc: "how often the worker snapshot used for scoring is reread (never the in-flight counts, which the claim reads atomically)", apply: setDuration(func(c *Config) *Duration { return &c.RefreshInterval })},
	{Path: "claim_lease", Env: "CLAIM_LEASE_SECONDS", Default: state.DefaultLease.String(), Doc: "lease of each claim, renewed every third of it while the request lives; a dead replica's claims stop counting after it (500ms to 30s)", apply: setDuration(func(c *Config) *Duration { return &c.ClaimLease })},
	{Path: "atomic_claim", Env: "ATOMIC_CLAIM", Default: "true", Doc: "false claims the worker picked on the cached snapshot without re-reading live counts: the herd race, for the herd benchmark only", apply: setBool(func(c *Config) *bool { return &c.AtomicClaim })},
	{Path: "telemetry.scrape_interval", Env: "SCRAPE_INTERVAL_SECONDS", Default: "500ms", Doc: "how often each worker's own metrics are read (by one replica at a time)", apply: setDuration(func(c *Config) *Duration { return &c.Telemetry.ScrapeInterval })},
	{Path: "telemetry.scrape_timeout", Env: "SCRAPE_TIMEOUT_SECONDS", Default: "400ms", Doc: "bound on one scrape", apply: setDuration(func(c *Config) *Duration { return &c.Telemetry.ScrapeTimeout })},
	{Path: "telemetry.stale_after", Env: "TELEMETRY_STALE_SECONDS", Default: "2s", Doc: "a scraped value older than this is unknown, not zero", apply: setDuration(func(c *Config) *Duration { return &c.Telemetry.StaleAfter })},
	{Path: "telemetry.request_usage", Env: "TELEMETRY_REQUEST_USAGE", Default: "true", Doc: "ask workers for usage on streamed requests (exact token counts), and remove it from what the client receives unless it asked", apply: setBool(func(c *Config) *bool { return &c.Telemetry.RequestUsage })},
	{Path: "health.check_interval", Env: "HEALTH_CHECK_INTERVAL_SECONDS", Default: "5s", Doc: "active health checks (GET /health; llama.cpp's 503 Loading model fails)", apply: setDuration(func(c *Config) *Duration { return &c.Health.CheckInterval })},
	{Path: "health.failure_threshold", Env: "HEALTH_FAILURE_THRESHOLD", Default: "3", Doc: "failed checks in a row that make a worker unhealthy", apply: setInt(func(c *Config) *int { return &c.Health.FailureThreshold })},
	{Path: "health.passive_failure_threshold", Env: "HEALTH_PASSIVE_FAILURE_THRESHOLD", Default: "3", Doc: "failed requests in a row (5xx, reset, connect failure, or moved by Envoy's retry) that make a worker unhealthy", apply: setInt(func(c *Config) *int { return &c.Health.PassiveFailureThreshold })},
	{Path: "health.hold_down", Env: "HEALTH_HOLD_DOWN_SECONDS", Default: "10s", Doc: "an unhealthy worker stays out at least this long before a passing check makes it recovering (one probe request at a time)", apply: setDuration(func(c *Config) *Duration { return &c.Health.HoldDown })},
	{Path: "queue.max_queue_size", Env: "MAX_QUEUE_SIZE", Default: "32", Doc: "queue cap per model for standard requests; past it, 429; 0 turns queueing off", apply: setInt(func(c *Config) *int { return &c.Queue.MaxQueueSize })},
	{Path: "queue.critical_multiplier", Env: "QUEUE_CRITICAL_MULTIPLIER", Default: "2", Doc: "critical requests may queue up to this multiple of max_queue_size", apply: setFloat(func(c *Config) *float64 { return &c.Queue.CriticalMultiplier })},
	{Path: "queue.batch_share", Env: "QUEUE_BATCH_SHARE", Default: "0.5", Doc: "batch requests queue only below this share of max_queue_size, and are shed first when a higher priority finds the queue full", apply: setFloat(func(c *Config) *float64 { return &c.Queue.BatchShare })},
	{Path: "queue.timeout.critical", Env: "QUEUE_TIMEOUT_CRITICAL_SECONDS", Default: "60s", Doc: "longest wait of a critical request; past it, 503", apply: setDuration(func(c *Config) *Duration { return &c.Queue.Timeout.Critical })},
	{Path: "queue.timeout.standard", Env: "QUEUE_TIMEOUT_STANDARD_SECONDS", Default: "30s", Doc: "longest wait of a standard request; past it, 503", apply: setDuration(func(c *Config) *Duration { return &c.Queue.Timeout.Standard })},
	{Path: "queue.timeout.batch", Env: "QUEUE_TIMEOUT_BATCH_SECONDS", Default: "15s", Doc: "longest wait of a batch request; past it, 503", apply: setDuration(func(c *Config) *Duration { return &c.Queue.Timeout.Batch })},
	{Path: "queue.fairness.weights.<tenant>", Env: "", Default: "", Doc: "a tenant's share within a priority band relative to others (default 1): while both wait, a tenant of weight 2 is served twice the tokens of one of weight 1 (docs/fairness.md)"},
	{Path: "queue.fairness.decay", Env: "QUEUE_FAIRNESS_DECAY_SECONDS", Default: "1m0s", Doc: "half-life of the tenants' service counters, so that past service is forgotten; 0: never", apply: setDuration(func(c *Config) *Duration { return &c.Queue.Fairness.Decay })},
	{Path: "queue.max_concurrent_requests", Env: "MAX_CONCURRENT_REQUESTS", Default: "0", Doc: "cap on requests in flight across the fleet (per pool with redis.pools); 0: none", apply: setInt(func(c *Config) *int { return &c.Queue.MaxConcurrentRequests })},
	{Path: "auth.keys[].{key,tenant,max_priority,min_ttft_slo,min_tpot_slo,fairness_ids}", Env: "", Default: "", Doc: "client API keys (Bearer), each with a tenant, the highest priority it may use (default standard), the tightest latency objectives its requests may ask for (durations; default slo.min_ttft and slo.min_tpot) and the fairness ids (x-llm-fairness-id) its requests may name as their tenant"},
	{Path: "auth.keys_file", Env: "AUTH_KEYS_FILE", Default: "", Doc: "YAML file with a list of keys in the same form (preferred: keep keys out of the main file)", apply: setString(func(c *Config) *string { return &c.Auth.KeysFile })},
	{Path: "-", Env: "AUTH_TOKEN", Default: "", Doc: "one more key: tenant `default`, up to critical", apply: func(c *Config, v string) error { c.Auth.Token = v; return nil }},
	{Path: "auth.enabled", Env: "AUTH_ENABLED", Default: "true", Doc: "false switches auth off even with keys configured; with no key configured at all auth is off, and the router says so at start and in /health", apply: func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		c.Auth.Enabled = &b
		return nil
	}},
	{Path: "auth.objectives.<name>", Env: "", Default: "", Doc: "llm-d inference objectives: the priority (critical, standard or batch) a request naming <name> in x-llm-d-inference-objective asks for; x-llm-priority wins when both are sent, the key's max_priority bounds either, and an objective not listed is ignored"},
	{Path: "auth.forward_authorization", Env: "AUTH_FORWARD_AUTHORIZATION", Default: "false", Doc: "pass the client's Authorization header to the worker (off: tenant keys never reach workers)", apply: setBool(func(c *Config) *bool { return &c.Auth.ForwardAuthorization })},
	{Path: "admin.pprof", Env: "ADMIN_PPROF", Default: "false", Doc: "serve Go's profiler (/debug/pprof/) on the admin port; off by default, as profiles cost CPU and reveal internals", apply: setBool(func(c *Config) *bool { return &c.Admin.Pprof })},
	{Path: "admin.token", Env: "ADMIN_TOKEN", Default: "", Doc: "admin credential (Bearer) for the admin API's changes: register, heartbeat, deregister, drain; separate from client keys; empty refuses every change", apply: setString(func(c *Config) *string { return &c.Admin.Token })},
	{Path: "redis.url", Env: "REDIS_URL", Default: "", Doc: "shared store, redis://[user:pass@]host:port/db; empty and no addrs: in-memory (one replica)", apply: setString(func(c *Config) *string { return &c.Redis.URL })},
	{Path: "redis.addrs", Env: "REDIS_ADDRS", Default: "", Doc: "Sentinel or Cluster seed addresses, comma-separated in the env var", apply: setList(func(c *Config) *[]string { return &c.Redis.Addrs })},
	{Path: "redis.master_name", Env: "REDIS_MASTER_NAME", Default: "", Doc: "Sentinel master name (with redis.addrs)", apply: setString(func(c *Config) *string { return &c.Redis.MasterName })},
	{Path: "redis.username", Env: "REDIS_USERNAME", Default: "", Doc: "ACL user", apply: setString(func(c *Config) *string { return &c.Redis.Username })},
	{Path: "redis.password", Env: "REDIS_PASSWORD", Default: "", Doc: "password (prefer the env var to the file)", apply: setString(func(c *Config) *string { return &c.Redis.Password })},
	{Path: "redis.db", Env: "REDIS_DB", Default: "0", Doc: "database number (not with Cluster)", apply: setInt(func(c *Config) *int { return &c.Redis.DB })},
	{Path: "redis.key_prefix", Env: "REDIS_KEY_PREFIX", Default: "llmr", Doc: "prefix of every key, wrapped in a {hash tag} so all keys share one Cluster slot (one slot per pool with redis.pools)", apply: setString(func(c *Config) *string { return &c.Redis.KeyPrefix })},
	{Path: "redis.cluster", Env: "REDIS_CLUSTER", Default: "false", Doc: "treat a single redis.addrs entry as a Cluster endpoint (several addrs without master_name already mean Cluster)", apply: setBool(func(c *Config) *bool { return &c.Redis.Cluster })},
	{Path: "redis.pools.<name>[]", Env: "", Default: "", Doc: "worker pools: each pool's models (and so the workers serving them) get keys under a hash tag of their own, {key_prefix:name}, so pools spread over Cluster shards; a model in at most one pool, every model of a worker in the same pool or none; queue.max_concurrent_requests then caps each pool. Every replica must use the same pools", apply: nil},
	{Path: "redis.pool_size", Env: "REDIS_POOL_SIZE", Default: "64", Doc: "connections per replica", apply: setInt(func(c *Config) *int { return &c.Redis.PoolSize })},
	{Path: "redis.timeout", Env: "REDIS_TIMEOUT_SECONDS", Default: "300ms", Doc: "bound on each Redis command; past it the router routes on local state (degraded) until Redis answers", apply: setDuration(func(c *Config) *Duration { return &c.Redis.Timeout })},
	{Path: "locality.zone", Env: "ROUTER_ZONE", Default: "", Doc: "this replica's zone, for node_distance", apply: setString(func(c *Config) *string { return &c.Locality.Zone })},
	{Path: "locality.region", Env: "ROUTER_REGION", Default: "", Doc: "this replica's region, for node_distance", apply: setString(func(c *Config) *string { return &c.Locality.Region })},
	{Path: "envoy.listen", Env: "ENVOY_LISTEN", Default: "127.0.0.1:8080", Doc: "where the rendered Envoy config listens for clients", apply: setString(func(c *Config) *string { return &c.Envoy.Listen })},
	{Path: "envoy.admin", Env: "ENVOY_ADMIN", Default: "127.0.0.1:9901", Doc: "Envoy's admin listener in the rendered config", apply: setString(func(c *Config) *string { return &c.Envoy.Admin })},
	{Path: "envoy.extproc_addrs", Env: "ENVOY_EXTPROC_ADDRS", Default: "[extproc_listen]", Doc: "every router replica, comma-separated in the env var", apply: setList(func(c *Config) *[]string { return &c.Envoy.ExtProcAddrs })},
	{Path: "envoy.discovery", Env: "ENVOY_DISCOVERY", Default: "static", Doc: "static: every worker cluster in the rendered YAML; xds: Envoy takes worker clusters from the router over ADS, so workers registered through the admin API are reachable", apply: setString(func(c *Config) *string { return &c.Envoy.Discovery })},
	{Path: "envoy.xds_join_delay", Env: "ENVOY_XDS_JOIN_DELAY_SECONDS", Default: "500ms", Doc: "with xds: a worker registered at run time takes requests after this long, once Envoy surely has its cluster", apply: setDuration(func(c *Config) *Duration { return &c.Envoy.XDSJoinDelay })},
	{Path: "envoy.failure_mode_allow", Env: "ENVOY_FAILURE_MODE_ALLOW", Default: "true", Doc: "fail-open: with no router replica answering, Envoy still serves requests, routed by model to the model's pool (LEAST_REQUEST), without caps, queue, priorities or API-key checks; false: fail-closed, 503", apply: setBool(func(c *Config) *bool { return &c.Envoy.FailureModeAllow })},
	{Path: "envoy.route_timeout", Env: "NODE_TIMEOUT_SECONDS", Default: "600s", Doc: "Envoy's whole-request timeout toward a worker (long streams)", apply: setDuration(func(c *Config) *Duration { return &c.Envoy.RouteTimeout })},
	{Path: "envoy.connect_timeout", Env: "CONNECT_TIMEOUT_SECONDS", Default: "2s", Doc: "Envoy's connect timeout to a worker", apply: setDuration(func(c *Config) *Duration { return &c.Envoy.ConnectTimeout })},
	{Path: "envoy.num_retries", Env: "MAX_RETRIES", Default: "2", Doc: "Envoy retries on connect failure, reset or 503, on another worker of the model", apply: setInt(func(c *Config) *int { return &c.Envoy.NumRetries })},
	{Path: "envoy.message_timeout", Env: "EXTPROC_MESSAGE_TIMEOUT_SECONDS", Default: "1s", Doc: "Envoy's wait for each ext_proc reply", apply: setDuration(func(c *Config) *Duration { return &c.Envoy.MessageTimeout })},
	{Path: "envoy.mode", Env: "ENVOY_MODE", Default: "cluster_header", Doc: "cluster_header: the x-llm-cluster header names a rendered cluster; endpoint_picker: the Gateway API Inference Extension's endpoint-picker protocol, for gateways that call a picker for an InferencePool (docs/gateways.md)", apply: setString(func(c *Config) *string { return &c.Envoy.Mode })},
	{Path: "envoy.fallbacks", Env: "ENVOY_FALLBACKS", Default: "0", Doc: "endpoint_picker: endpoints listed after the pick, comma-separated, for the gateway's retries, best first by the same scores; only for override_host gateways (Istio): ORIGINAL_DST gateways (kgateway, Envoy Gateway) route nothing on a list (docs/gateways.md)", apply: setInt(func(c *Config) *int { return &c.Envoy.Fallbacks })},
	{Path: "envoy.extproc_ca_file", Env: "ENVOY_EXTPROC_CA_FILE", Default: "", Doc: "with tls.extproc: the CA the rendered Envoy verifies the router's certificate with; unset, it encrypts without verifying (a self-signed certificate)", apply: setString(func(c *Config) *string { return &c.Envoy.ExtProcCAFile })},
	{Path: "tls.extproc", Env: "TLS_EXTPROC", Default: "false", Doc: "serve the ext_proc listener over TLS (gateways connect to a picker over TLS by default); the rendered Envoy config then speaks TLS to it", apply: setBool(func(c *Config) *bool { return &c.TLS.ExtProc })},
	{Path: "tls.admin", Env: "TLS_ADMIN", Default: "false", Doc: "serve the admin listener over TLS", apply: setBool(func(c *Config) *bool { return &c.TLS.Admin })},
	{Path: "tls.cert_file", Env: "TLS_CERT_FILE", Default: "", Doc: "PEM certificate for the TLS listeners, reloaded when it changes; unset, a self-signed certificate is made at start", apply: setString(func(c *Config) *string { return &c.TLS.CertFile })},
	{Path: "tls.key_file", Env: "TLS_KEY_FILE", Default: "", Doc: "PEM private key for tls.cert_file", apply: setString(func(c *Config) *string { return &c.TLS.KeyFile })},
	{Path: "discovery.inference_pool", Env: "DISCOVERY_INFERENCE_POOL", Default: "", Doc: "take workers from the pods this InferencePool (inference.networking.k8s.io/v1) selects, on its target port: ready pods join, not-ready and deleted ones leave, terminating ones drain (docs/gateways.md)", apply: setString(func(c *Config) *string { return &c.Discovery.InferencePool })},
	{Path: "discovery.selector", Env: "DISCOVERY_SELECTOR", Default: "", Doc: "instead of a pool: the pods' labels, k=v,k2=v2, with discovery.target_port", apply: setString(func(c *Config) *string { return &c.Discovery.Selector })},
	{Path: "discovery.target_port", Env: "DISCOVERY_TARGET_PORT", Default: "", Doc: "the model server's port on each pod, with discovery.selector", apply: setInt(func(c *Config) *int { return &c.Discovery.TargetPort })},
	{Path: "discovery.namespace", Env: "POD_NAMESPACE", Default: "", Doc: "namespace of the pool and its pods; empty: the router's own", apply: setString(func(c *Config) *string { return &c.Discovery.Namespace })},
	{Path: "discovery.models", Env: "DISCOVERY_MODELS", Default: "", Doc: "the models every discovered pod serves (pods carry no model names), comma-separated in the env var", apply: setList(func(c *Config) *[]string { return &c.Discovery.Models })},
	{Path: "discovery.max_concurrency", Env: "DISCOVERY_MAX_CONCURRENCY", Default: "0", Doc: "max_concurrency of each discovered pod: an optional safety ceiling; 0: none (the strategy and the learned limits bound each pod)", apply: setInt(func(c *Config) *int { return &c.Discovery.MaxConcurrency })},
	{Path: "discovery.metrics_format", Env: "DISCOVERY_METRICS_FORMAT", Default: "vllm", Doc: "metrics_format of each discovered pod", apply: setString(func(c *Config) *string { return &c.Discovery.MetricsFormat })},
	{Path: "scoring.weights.active", Env: "SCORING_WEIGHT_ACTIVE", Default: "100", Doc: "weight of a worker's live in-flight requests (all replicas), read in the claim: one more request always costs this much; the scored formula's other weights follow, one per registered term (scoring/doc.go defines them)", apply: setFloat(func(c *Config) *float64 { return &c.Scoring.Weights.Active })},
}, termKeys(), []Key{
	{Path: "scoring.weights.prefix", Env: "SCORING_WEIGHT_PREFIX", Default: "300", Doc: "weight of the share of the prompt's 16-token blocks a worker was not sent before (prefix-cache affinity), read live in the claim from an index shared by every replica: a full miss weighs as three more requests in flight (3·100·active); chosen on held-out benchmark seeds (docs/benchmark-results.md); 0 turns the index off", apply: setFloat(func(c *Config) *float64 { return &c.Scoring.Weights.Prefix })},
	{Path: "scoring.weights.token_load", Env: "SCORING_WEIGHT_TOKEN_LOAD", Default: "1000", Doc: "weight of a worker's in-flight tokens (uncached prompt + expected output, all replicas) relative to its KV capacity (kv_blocks·16), read live in the claim: a worker whose KV is full of in-flight work weighs as ten more requests, so a small GPU fills no faster than a large one; chosen on held-out benchmark seeds; 0: off", apply: setFloat(func(c *Config) *float64 { return &c.Scoring.Weights.TokenLoad })},
	{Path: "scoring.ttft_slo", Env: "SCORING_TTFT_SLO_SECONDS", Default: "2s", Doc: "prefix load guard (sticky until saturated): a warm worker's match stops counting once its in-flight prefill plus the request's uncached prompt exceeds ttft_slo × its prefill rate; 0: no guard", apply: setDuration(func(c *Config) *Duration { return &c.Scoring.TTFTSLO })},
	{Path: "scoring.prefill_tokens_per_second", Env: "SCORING_PREFILL_TOKENS_PER_SECOND", Default: "10000", Doc: "prefill rate of a worker that names none (workers[].prefill_tokens_per_second), for the load guard", apply: setFloat(func(c *Config) *float64 { return &c.Scoring.PrefillTokensPerSecond })},
	{Path: "scoring.kv_blocks", Env: "SCORING_KV_BLOCKS", Default: "4096", Doc: "KV cache in 16-token blocks of a worker that names none (workers[].kv_blocks): the bound of its prefix index (least recently used evicted) and the capacity its token load is measured against; 4096 is gpusim's default 65,536-token cache", apply: setInt(func(c *Config) *int { return &c.Scoring.KVBlocks })},
	{Path: "scoring.max_prefix_blocks", Env: "SCORING_MAX_PREFIX_BLOCKS", Default: "1024", Doc: "leading prompt blocks a claim matches and records (bounds Redis CPU and memory per claim: the match is a binary search, the record one entry per block); 0: all the body parser kept (8192)", apply: setInt(func(c *Config) *int { return &c.Scoring.MaxPrefixBlocks })},
	{Path: "scoring.job_cost_scale", Env: "JOB_COST_SCALE_SECONDS", Default: "10s", Doc: "service time at which norm_job_cost is 0.5", apply: setDuration(func(c *Config) *Duration { return &c.Scoring.JobCostScale })},
	{Path: "inference_aware.min_samples", Env: "INFERENCE_AWARE_MIN_SAMPLES", Default: "3", Doc: "completed requests before a worker is scored on its telemetry", apply: setInt(func(c *Config) *int { return &c.InferenceAware.MinSamples })},
	{Path: "inference_aware.staleness", Env: "INFERENCE_AWARE_STALENESS_SECONDS", Default: "60s", Doc: "telemetry older than this counts as no data", apply: setDuration(func(c *Config) *Duration { return &c.InferenceAware.Staleness })},
	{Path: "inference_aware.load_penalty", Env: "INFERENCE_AWARE_LOAD_PENALTY", Default: "0.1", Doc: "per-active-request multiplier on the estimated latency", apply: setFloat(func(c *Config) *float64 { return &c.InferenceAware.LoadPenalty })},
	{Path: "adaptive_caps.enabled", Env: "ADAPTIVE_CAPS", Default: "false", Doc: "learn each worker's concurrency limit (1..max_concurrency) from its TTFT and inter-token latency, shared by every replica, shown in /stats, explain and llm_router_node_concurrency_limit; not used with strategy predicted, whose limits come from the latency model (docs/latency-model.md); off by default: short runs on the Azure trace show it hurting (TTFT swings with prompt length), see docs/adaptive-caps.md", apply: setBool(func(c *Config) *bool { return &c.AdaptiveCaps.Enabled })},
	{Path: "adaptive_caps.ttft_tolerance", Env: "ADAPTIVE_CAPS_TTFT_TOLERANCE", Default: "2", Doc: "a worker's TTFT may rise to this multiple of the lowest it showed before its limit shrinks (by the ratio, at most halved an update)", apply: setFloat(func(c *Config) *float64 { return &c.AdaptiveCaps.TTFTTolerance })},
	{Path: "adaptive_caps.itl_tolerance", Env: "ADAPTIVE_CAPS_ITL_TOLERANCE", Default: "1.5", Doc: "the same for its inter-token latency (1 / tokens per second)", apply: setFloat(func(c *Config) *float64 { return &c.AdaptiveCaps.ITLTolerance })},
	{Path: "adaptive_caps.min_samples", Env: "ADAPTIVE_CAPS_MIN_SAMPLES", Default: "8", Doc: "new TTFT or tokens/s samples (streamed responses) a worker needs before its limit moves", apply: setInt(func(c *Config) *int { return &c.AdaptiveCaps.MinSamples })},
	{Path: "adaptive_caps.engine_waiting", Env: "ADAPTIVE_CAPS_ENGINE_WAITING", Default: "2", Doc: "requests a worker's engine may hold waiting (scraped num_requests_waiting) before its limit shrinks by the share the engine runs; 0: off", apply: setFloat(func(c *Config) *float64 { return &c.AdaptiveCaps.EngineWaiting })},
	{Path: "adaptive_caps.itl_slo", Env: "ADAPTIVE_CAPS_ITL_SLO", Default: "0s", Doc: "the inter-token SLO (a request's p99 gap) the tail signal guards: each engine's gaps over it are read from vLLM's inter-token histogram (at the largest bucket edge not above it) in windows of 500 gaps, and a worker whose window has more than slow_gap_share of them has its limit cut by the ratio (at most halved), and grows only after a window within it; 0s: off (the only signal that sees the tail: the others read means)", apply: setDuration(func(c *Config) *Duration { return &c.AdaptiveCaps.ITLSLO })},
	{Path: "adaptive_caps.slow_gap_share", Env: "ADAPTIVE_CAPS_SLOW_GAP_SHARE", Default: "0.0005", Doc: "share of a worker's inter-token gaps that may exceed itl_slo (one in 2,000: a request fails a p99 gap SLO on one or two slow gaps; see docs/adaptive-caps.md)", apply: setFloat(func(c *Config) *float64 { return &c.AdaptiveCaps.SlowGapShare })},
	{Path: "adaptive_caps.token_limits", Env: "ADAPTIVE_CAPS_TOKEN_LIMITS", Default: "true", Doc: "learn an in-flight token limit beside the request limit (uncached prompt plus max_tokens of the claims a worker holds), moved by the same signals: it starts at the first cut from what the request limit holds at the mix in flight, so a worker taught by long requests is not swamped by the next long ones after a spell of short ones; an idle worker always takes one request; with it every claim carries its tokens (see docs/adaptive-caps.md)", apply: setBool(func(c *Config) *bool { return &c.AdaptiveCaps.TokenLimits })},
	{Path: "adaptive_caps.floor", Env: "ADAPTIVE_CAPS_FLOOR", Default: "1", Doc: "lowest learned limit", apply: setInt(func(c *Config) *int { return &c.AdaptiveCaps.Floor })},
	{Path: "slo.ttft", Env: "SLO_TTFT_SECONDS", Default: "2s", Doc: "time-to-first-token objective of a request that names none (x-llm-slo-ttft-ms) and whose objective, model and priority have none configured; recorded in the decision, not yet used to place or admit", apply: setDuration(func(c *Config) *Duration { return &c.SLO.TTFT })},
	{Path: "slo.tpot", Env: "SLO_TPOT_SECONDS", Default: "100ms", Doc: "time-per-output-token objective likewise (x-llm-slo-tpot-ms)", apply: setDuration(func(c *Config) *Duration { return &c.SLO.TPOT })},
	{Path: "slo.min_ttft", Env: "SLO_MIN_TTFT_SECONDS", Default: "500ms", Doc: "tightest TTFT objective a request's header may ask for unless its key sets min_ttft_slo (and with keys off); tighter is clamped to it", apply: setDuration(func(c *Config) *Duration { return &c.SLO.MinTTFT })},
	{Path: "slo.min_tpot", Env: "SLO_MIN_TPOT_SECONDS", Default: "25ms", Doc: "tightest TPOT objective likewise (key: min_tpot_slo)", apply: setDuration(func(c *Config) *Duration { return &c.SLO.MinTPOT })},
	{Path: "slo.models.<model>.<priority>.{ttft,tpot}", Env: "", Default: "", Doc: "objectives of a model's requests at a priority (critical, standard or batch) that name none in headers; each unset one falls to the default"},
	{Path: "slo.objectives.<name>.{ttft,tpot}", Env: "", Default: "", Doc: "objectives of requests naming <name> in x-llm-d-inference-objective (and none in headers); ahead of slo.models"},
}, tracingKeys(), loraKeys(), disaggregationKeys(), []Key{
	{Path: "workers[].{id,address,models,zone,region,max_concurrency,metrics_format,metrics_url,health_url,dcgm_url,dcgm_gpu,kv_blocks,prefill_tokens_per_second,adapters,max_loras,role}", Env: "VLLM_NODES, MODEL_NAME", Default: "", Doc: "the GPU workers; id is also the Envoy cluster name; kv_blocks and prefill_tokens_per_second default to the scoring keys of the same names; role prefill, decode or both (default: docs/disaggregation.md); metrics_format vllm (default), sglang, llamacpp, trtllm or none; metrics_url/health_url default to the address's /metrics and /health; dcgm_url with dcgm_gpu (gpu index or UUID) feeds gpu_util. VLLM_NODES (comma-separated URLs) with MODEL_NAME replaces the list, with ids node-0.. and max_concurrency from MAX_CONCURRENCY_PER_NODE (default 0); max_concurrency is an optional safety ceiling, 0 or absent: none; adapters are the LoRA adapters its engine serves (names in lora.adapters, or adapters of its only model) and max_loras its adapter slots (0: what the engine reports, else 1)", apply: nil},
})

// Set applies one key by its path (scoring.weights.prefix=...), as the
// environment would: for tools that vary one setting, such as the
// benchmark's configurations.
func Set(c *Config, path, value string) error {
	for _, k := range settable() {
		if k.Path == path && k.apply != nil {
			if err := k.apply(c, strings.TrimSpace(value)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no such settable key", path)
}

func applyEnv(c *Config, getenv func(string) string) error {
	for _, k := range settable() {
		if k.Env == "" || k.apply == nil {
			continue
		}
		if v := strings.TrimSpace(getenv(k.Env)); v != "" {
			if err := k.apply(c, v); err != nil {
				return fmt.Errorf("%s (from env %s): %w", k.Path, k.Env, err)
			}
		}
	}
	return applyNodesEnv(c, getenv)
}

// applyNodesEnv supports VLLM_NODES, the worker list of an earlier router
// design's environment.
func applyNodesEnv(c *Config, getenv func(string) string) error {
	nodes := strings.TrimSpace(getenv("VLLM_NODES"))
	if nodes == "" {
		return nil
	}
	model := strings.TrimSpace(getenv("MODEL_NAME"))
	if model == "" {
		return fmt.Errorf("workers (from env VLLM_NODES): MODEL_NAME is required with VLLM_NODES")
	}
	maxConc := 0 // no ceiling: see Worker.MaxConcurrency
	if v := strings.TrimSpace(getenv("MAX_CONCURRENCY_PER_NODE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("workers (from env MAX_CONCURRENCY_PER_NODE): %w", err)
		}
		maxConc = n
	}
	var ws []Worker
	for i, raw := range strings.Split(nodes, ",") {
		raw = strings.TrimSpace(raw)
		addr := raw
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			addr = u.Host
		}
		ws = append(ws, Worker{ID: fmt.Sprintf("node-%d", i), Address: addr, Models: []string{model}, MaxConcurrency: maxConc})
	}
	c.Workers = ws
	return nil
}

func setString(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func setList(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*field(c) = out
		return nil
	}
}

func setBool(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*field(c) = b
		return nil
	}
}

func setInt(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*field(c) = n
		return nil
	}
}

func setInt64(field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*field(c) = n
		return nil
	}
}

func setFloat(field func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", v)
		}
		*field(c) = f
		return nil
	}
}

func setDuration(field func(*Config) *Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		*field(c) = d
		return nil
	}
}

// MarkdownTable renders Keys as the table of docs/configuration.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| key | env var | default | what it does |\n|---|---|---|---|\n")
	for _, k := range Keys {
		env := k.Env
		if env == "" {
			env = "-"
		} else {
			env = "`" + strings.ReplaceAll(env, ", ", "`, `") + "`"
		}
		def := k.Default
		if def == "" {
			def = "-"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Path, env, def, k.Doc)
	}
	return b.String()
}
