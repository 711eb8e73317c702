// Package config loads, defaults and validates the router's YAML
// configuration and applies environment-variable overrides.
//
// The file is the contract operators write by hand, so loading is strict:
// an unknown key, a wrong type or an out-of-range value fails at start with
// a message that names the key (for example "workers[1].max_concurrency:
// must be at least 1"). Every key, its default and its environment variable
// are listed once, in Keys, which also generates docs/configuration.md's table.
package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Config is the whole router configuration.
type Config struct {
	ExtProcListen   string   `yaml:"extproc_listen"`
	AdminListen     string   `yaml:"admin_listen"`
	Strategy        string   `yaml:"strategy"`
	LogLevel        string   `yaml:"log_level"`
	ReplicaID       string   `yaml:"replica_id"`
	MaxBodyBytes    int64    `yaml:"max_body_bytes"`
	ShutdownGrace   Duration `yaml:"shutdown_grace"`
	ShutdownDelay   Duration `yaml:"shutdown_delay"`
	EMAAlpha        float64  `yaml:"ema_alpha"`
	DecisionLogSize int      `yaml:"decision_log_size"`
	// DecisionLogCandidates bounds the candidates in each decision's log
	// line (the best by total); explain always has all. 0: all.
	DecisionLogCandidates int `yaml:"decision_log_candidates"`
	// RefreshInterval bounds how stale the cached worker snapshot used for
	// scoring may be. In-flight counts are never taken from it: the claim
	// reads them atomically.
	RefreshInterval Duration `yaml:"refresh_interval"`

	// ClaimLease bounds how long a dead replica's claims keep counting:
	// live replicas renew their claims every ClaimLease/3.
	ClaimLease Duration `yaml:"claim_lease"`
	// AtomicClaim off makes the scheduler claim the worker it picked on the
	// cached snapshot without re-reading live counts: the herd race, kept
	// only so the herd benchmark can show it. Never turn it off in production.
	AtomicClaim bool `yaml:"atomic_claim"`

	Telemetry      Telemetry      `yaml:"telemetry"`
	Health         Health         `yaml:"health"`
	Queue          Queue          `yaml:"queue"`
	Auth           Auth           `yaml:"auth"`
	Admin          Admin          `yaml:"admin"`
	Redis          Redis          `yaml:"redis"`
	Locality       Locality       `yaml:"locality"`
	Envoy          Envoy          `yaml:"envoy"`
	TLS            TLS            `yaml:"tls"`
	Discovery      Discovery      `yaml:"discovery"`
	Scoring        Scoring        `yaml:"scoring"`
	InferenceAware InferenceAware `yaml:"inference_aware"`
	AdaptiveCaps   AdaptiveCaps   `yaml:"adaptive_caps"`
	SLO            SLO            `yaml:"slo"`
	Tracing        Tracing        `yaml:"tracing"`
	LoRA           LoRA           `yaml:"lora"`
	Disaggregation Disaggregation `yaml:"disaggregation"`
	Workers        []Worker       `yaml:"workers"`
}

// Telemetry configures how workers' own metrics feed the scores.
type Telemetry struct {
	// ScrapeInterval: how often each worker's metrics are read (by one
	// replica at a time).
	ScrapeInterval Duration `yaml:"scrape_interval"`
	ScrapeTimeout  Duration `yaml:"scrape_timeout"`
	// StaleAfter: a scraped value older than this is unknown, not zero.
	StaleAfter Duration `yaml:"stale_after"`
	// RequestUsage adds stream_options.include_usage to streamed requests
	// that lack it, for exact token counts; the usage chunk is then removed
	// from the response, so the client receives exactly what it asked for.
	RequestUsage bool `yaml:"request_usage"`
}

// Health configures the health state machine.
type Health struct {
	CheckInterval           Duration `yaml:"check_interval"`
	FailureThreshold        int      `yaml:"failure_threshold"`
	PassiveFailureThreshold int      `yaml:"passive_failure_threshold"`
	HoldDown                Duration `yaml:"hold_down"`
}

// Queue configures admission: requests beyond every worker's cap wait in
// a per-model queue held by the router.
type Queue struct {
	// MaxQueueSize is the queue cap per model for standard requests; 0
	// turns queueing off (a request finding every worker full gets 429).
	MaxQueueSize       int      `yaml:"max_queue_size"`
	CriticalMultiplier float64  `yaml:"critical_multiplier"`
	BatchShare         float64  `yaml:"batch_share"`
	Timeout            Timeouts `yaml:"timeout"`
	// Fairness shares each priority band between tenants (fairness.go).
	Fairness Fairness `yaml:"fairness"`
	// MaxConcurrentRequests caps requests in flight across the fleet (a
	// global semaphore, per pool when pools are set); 0: no global cap.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests"`
}

// Timeouts is the longest a request of each priority waits in the queue.
type Timeouts struct {
	Critical Duration `yaml:"critical"`
	Standard Duration `yaml:"standard"`
	Batch    Duration `yaml:"batch"`
}

// For is the timeout of priority p ("" and unknown: standard's).
func (t Timeouts) For(p state.Priority) time.Duration {
	switch p {
	case state.PriorityCritical:
		return t.Critical.D()
	case state.PriorityBatch:
		return t.Batch.D()
	}
	return t.Standard.D()
}

// ByRank lists the timeouts by priority rank (state.Priority.Rank).
func (t Timeouts) ByRank() [3]time.Duration {
	var out [3]time.Duration
	for _, p := range state.Priorities() {
		out[p.Rank()] = t.For(p)
	}
	return out
}

// Max is the longest of the three.
func (t Timeouts) Max() time.Duration {
	return max(t.Critical.D(), t.Standard.D(), t.Batch.D())
}

// Admin configures the native admin API.
type Admin struct {
	// Token is the admin credential (Bearer) for changes: registration,
	// heartbeats, drains. Separate from client API keys; empty refuses
	// every change.
	Token string `yaml:"token"`
	// Pprof serves Go's profiler under /debug/pprof/ on the admin port.
	Pprof bool `yaml:"pprof"`
}

// Auth configures client API keys.
type Auth struct {
	// Enabled false switches auth off explicitly even with keys configured.
	// With no key configured at all, auth is off and the router says so at
	// start and in /health (never silently).
	Enabled  *bool    `yaml:"enabled"`
	Keys     []APIKey `yaml:"keys"`
	KeysFile string   `yaml:"keys_file"`
	// ForwardAuthorization passes the client's Authorization header on to
	// the worker; off by default, so tenant keys never reach workers.
	ForwardAuthorization bool `yaml:"forward_authorization"`
	// Objectives maps the names clients and gateways send in llm-d's
	// x-llm-d-inference-objective header to priorities, as llm-d's
	// InferenceObjectives do; x-llm-priority wins when both are sent, and
	// the key's max_priority bounds either.
	Objectives map[string]state.Priority `yaml:"objectives"`
	// Token is AUTH_TOKEN: one key, tenant "default", up to critical.
	Token string `yaml:"-"`
}

// APIKey is one client credential.
type APIKey struct {
	Key         string         `yaml:"key"`
	Tenant      string         `yaml:"tenant"`
	MaxPriority state.Priority `yaml:"max_priority"` // critical, standard (default) or batch
	// MinTTFTSLO and MinTPOTSLO are the tightest latency objectives the
	// key's requests may ask for; 0: slo.min_ttft and slo.min_tpot.
	MinTTFTSLO Duration `yaml:"min_ttft_slo"`
	MinTPOTSLO Duration `yaml:"min_tpot_slo"`
	// FairnessIDs are the fairness ids (x-llm-fairness-id) the key's
	// requests may name as their tenant; any other is ignored.
	FairnessIDs []string `yaml:"fairness_ids"`
}

// Redis configures the shared store. Empty (no url, no addrs): the
// in-memory store, for a single replica.
type Redis struct {
	URL        string   `yaml:"url"`
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Username   string   `yaml:"username"`
	Password   string   `yaml:"password"`
	DB         int      `yaml:"db"`
	KeyPrefix  string   `yaml:"key_prefix"`
	Cluster    bool     `yaml:"cluster"`
	PoolSize   int      `yaml:"pool_size"`
	// Timeout bounds each Redis command; past it the router routes on local
	// state (degraded) until Redis answers again.
	Timeout Duration `yaml:"timeout"`
	// Pools shard the keys by worker pool: pool name → models (see
	// Pools in state/redis). Empty: every key under one hash tag.
	Pools map[string][]string `yaml:"pools"`
}

// Enabled reports whether a Redis is configured.
func (r Redis) Enabled() bool { return r.URL != "" || len(r.Addrs) > 0 }

// Locality is where this router replica runs; workers elsewhere get a
// node-distance penalty.
type Locality struct {
	Zone   string `yaml:"zone"`
	Region string `yaml:"region"`
}

// Envoy holds what the rendered Envoy configuration needs beyond the workers.
type Envoy struct {
	Listen string `yaml:"listen"`
	Admin  string `yaml:"admin"`
	// ExtProcAddrs lists every router replica's ext_proc address; empty means
	// just this router's extproc_listen.
	ExtProcAddrs []string `yaml:"extproc_addrs"`
	// Discovery: static (every worker cluster in the rendered YAML) or xds
	// (Envoy takes worker clusters from the router over ADS, so workers
	// registered at run time are reachable).
	Discovery string `yaml:"discovery"`
	// FailureModeAllow renders ext_proc fail-open: with no router replica
	// answering, requests are still served, by model, without caps, queue,
	// priorities or API keys. False renders fail-closed (503).
	FailureModeAllow bool `yaml:"failure_mode_allow"`
	// XDSJoinDelay holds back a worker registered at run time until Envoy
	// has surely received its cluster over xDS.
	XDSJoinDelay   Duration `yaml:"xds_join_delay"`
	RouteTimeout   Duration `yaml:"route_timeout"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	NumRetries     int      `yaml:"num_retries"`
	MessageTimeout Duration `yaml:"message_timeout"`
	// Mode is how the router tells Envoy where a request goes:
	// cluster_header (x-llm-cluster names a rendered cluster) or
	// endpoint_picker (the Gateway API Inference Extension's endpoint-picker
	// protocol: ip:port in x-gateway-destination-endpoint and envoy.lb
	// metadata, the same value in both).
	Mode string `yaml:"mode"`
	// Fallbacks is how many endpoints follow the pick in endpoint_picker
	// mode, best first by the same scores. 0 by default: gateways with an
	// ORIGINAL_DST cluster (kgateway, Envoy Gateway) read the header as one
	// address and route nothing when it holds a list; only override_host
	// gateways (Istio, the rendered config) retry down a list.
	Fallbacks int `yaml:"fallbacks"`
	// ExtProcCAFile, when set, makes the rendered Envoy verify the router's
	// certificate against it (with tls.extproc); unset, Envoy encrypts
	// without verifying, as gateways do with a picker's self-signed
	// certificate.
	ExtProcCAFile string `yaml:"extproc_ca_file"`
}

// Modes are the accepted envoy.mode values.
const (
	ModeClusterHeader  = "cluster_header"
	ModeEndpointPicker = "endpoint_picker"
)

// Discovery takes workers from Kubernetes pods (internal/discovery), beside
// any listed under workers.
type Discovery struct {
	// InferencePool names the pool whose selector and target port are
	// followed; Selector ("k=v,k2=v2") with TargetPort is the alternative.
	InferencePool string `yaml:"inference_pool"`
	Selector      string `yaml:"selector"`
	TargetPort    int    `yaml:"target_port"`
	// Namespace of the pool and pods; empty: the router's own.
	Namespace string `yaml:"namespace"`
	// Models every discovered pod serves, with its cap (0: none) and
	// metrics format.
	Models         []string `yaml:"models"`
	MaxConcurrency int      `yaml:"max_concurrency"`
	MetricsFormat  string   `yaml:"metrics_format"`
}

// Enabled reports whether workers are discovered from Kubernetes.
func (d Discovery) Enabled() bool { return d.InferencePool != "" || d.Selector != "" }

// Labels parses Selector.
func (d Discovery) Labels() (map[string]string, error) {
	out := map[string]string{}
	for part := range strings.SplitSeq(d.Selector, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q: want key=value", part)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// TLS configures the router's own listeners.
type TLS struct {
	// ExtProc serves the ext_proc listener over TLS.
	ExtProc bool `yaml:"extproc"`
	// Admin serves the admin listener over TLS (its token is a header).
	Admin bool `yaml:"admin"`
	// CertFile and KeyFile hold the certificate (PEM), reloaded when the
	// files change; unset, a self-signed certificate is made at start.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Scoring configures the scored strategy.
type Scoring struct {
	Weights Weights `yaml:"weights"`
	// JobCostScale is the expected service time at which norm_job_cost
	// reaches 0.5 (norm = cost / (cost + scale)).
	JobCostScale Duration `yaml:"job_cost_scale"`
	// TTFTSLO is the time to first token the prefix load guard protects: a
	// warm worker's match stops counting once its in-flight prefill plus
	// the request's uncached prompt would take longer at its prefill rate.
	// 0 turns the guard off.
	TTFTSLO Duration `yaml:"ttft_slo"`
	// PrefillTokensPerSecond and KVBlocks are the defaults of the workers'
	// own keys of the same names.
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	KVBlocks               int     `yaml:"kv_blocks"`
	// MaxPrefixBlocks bounds the leading prompt blocks a claim matches and
	// records (Redis CPU and memory per claim); 0: every block the body
	// parser kept.
	MaxPrefixBlocks int `yaml:"max_prefix_blocks"`
}

// InferenceAware configures the inference_aware strategy (expected
// completion time, the formula of an earlier router design); the keys keep
// that design's names.
type InferenceAware struct {
	MinSamples  int      `yaml:"min_samples"`
	Staleness   Duration `yaml:"staleness"`
	LoadPenalty float64  `yaml:"load_penalty"`
}

// Worker is one GPU inference server. Its ID is also its Envoy cluster name.
type Worker struct {
	ID      string   `yaml:"id"`
	Address string   `yaml:"address"`
	Models  []string `yaml:"models"`
	Zone    string   `yaml:"zone"`
	Region  string   `yaml:"region"`
	// MaxConcurrency is an optional safety ceiling on the requests the
	// worker runs at once; 0 (absent): none, the strategy and the learned
	// limits bound it.
	MaxConcurrency int `yaml:"max_concurrency"`
	// MetricsFormat: vllm (default), sglang, llamacpp, trtllm, or none.
	MetricsFormat string `yaml:"metrics_format"`
	MetricsURL    string `yaml:"metrics_url"`
	HealthURL     string `yaml:"health_url"`
	DCGMURL       string `yaml:"dcgm_url"`
	DCGMGPU       string `yaml:"dcgm_gpu"`
	// KVBlocks is the worker's KV cache in 16-token blocks (vLLM logs it
	// as "# GPU blocks"); PrefillTokensPerSecond its prefill rate. 0: the
	// scoring defaults.
	KVBlocks               int     `yaml:"kv_blocks"`
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	// Adapters are the LoRA adapters the worker's engine serves (its
	// --lora-modules): names of lora.adapters, or adapters of its only
	// model; MaxLoras its adapter slots (0: what the engine reports).
	Adapters []string `yaml:"adapters"`
	MaxLoras int      `yaml:"max_loras"`
	// Role is the part of serving the worker does: prefill, decode or
	// both (default; docs/disaggregation.md).
	Role string `yaml:"role"`
}

// Strategies lists the accepted values of strategy: the strategies
// registered with scoring in this binary. llm-router registers the
// product's own; llm-bench also links the benchmark's emulations of other
// schedulers (scoring/emulate), so only its routers accept their names.
func Strategies() []string { return scoring.Names() }

// Default returns the configuration every loaded file starts from.
func Default() Config {
	return Config{
		ExtProcListen:         "127.0.0.1:9002",
		AdminListen:           "127.0.0.1:9090",
		Strategy:              scoring.Predicted,
		LogLevel:              "info",
		MaxBodyBytes:          4 << 20,
		ShutdownGrace:         Duration(30 * time.Second),
		ShutdownDelay:         Duration(time.Second),
		EMAAlpha:              scheduler.DefaultEMAAlpha,
		DecisionLogSize:       10000,
		DecisionLogCandidates: 8,
		RefreshInterval:       Duration(scheduler.DefaultRefreshInterval),
		ClaimLease:            Duration(state.DefaultLease),
		AtomicClaim:           true,
		Redis:                 Redis{KeyPrefix: "llmr", Timeout: Duration(300 * time.Millisecond), PoolSize: 64},
		Telemetry: Telemetry{
			ScrapeInterval: Duration(500 * time.Millisecond),
			ScrapeTimeout:  Duration(400 * time.Millisecond),
			StaleAfter:     Duration(2 * time.Second),
			RequestUsage:   true,
		},
		Health: Health{
			CheckInterval:           Duration(5 * time.Second),
			FailureThreshold:        3,
			PassiveFailureThreshold: 3,
			HoldDown:                Duration(10 * time.Second),
		},
		Queue: Queue{
			MaxQueueSize:       32,
			CriticalMultiplier: 2,
			BatchShare:         0.5,
			Timeout: Timeouts{
				Critical: Duration(60 * time.Second),
				Standard: Duration(30 * time.Second),
				Batch:    Duration(15 * time.Second),
			},
			Fairness: Fairness{Decay: DefaultFairDecay},
		},
		Envoy: Envoy{
			Listen:           "127.0.0.1:8080",
			Admin:            "127.0.0.1:9901",
			RouteTimeout:     Duration(600 * time.Second),
			ConnectTimeout:   Duration(2 * time.Second),
			NumRetries:       2,
			Discovery:        "static",
			FailureModeAllow: true,
			XDSJoinDelay:     Duration(500 * time.Millisecond),
			MessageTimeout:   Duration(time.Second),
			Mode:             ModeClusterHeader,
			Fallbacks:        0,
		},
		Discovery: Discovery{MetricsFormat: "vllm"},
		Scoring: Scoring{
			Weights:                defaultWeights(),
			JobCostScale:           Duration(10 * time.Second),
			TTFTSLO:                Duration(2 * time.Second),
			PrefillTokensPerSecond: 10000,
			KVBlocks:               4096,
			MaxPrefixBlocks:        1024,
		},
		AdaptiveCaps:   defaultAdaptiveCaps(),
		SLO:            defaultSLO(),
		Tracing:        defaultTracing(),
		LoRA:           defaultLoRA(),
		Disaggregation: defaultDisaggregation(),
		InferenceAware: InferenceAware{
			MinSamples:  3,
			Staleness:   Duration(60 * time.Second),
			LoadPenalty: 0.1,
		},
	}
}

var (
	lineRe    = regexp.MustCompile(`line (\d+): `)
	unknownRe = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// Models returns every model served by some worker, sorted.
func (c *Config) Models() []string {
	var out []string
	for _, w := range c.Workers {
		for _, m := range w.Models {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}
