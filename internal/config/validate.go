package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Validate checks every key and names the first bad one.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	checkAddr := func(key, v string) {
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(key, "want host:port, got %q", v)
		}
	}
	checkAddr("extproc_listen", c.ExtProcListen)
	checkAddr("admin_listen", c.AdminListen)
	checkAddr("envoy.listen", c.Envoy.Listen)
	checkAddr("envoy.admin", c.Envoy.Admin)
	for i, a := range c.Envoy.ExtProcAddrs {
		checkAddr(fmt.Sprintf("envoy.extproc_addrs[%d]", i), a)
	}
	if names := Strategies(); !slices.Contains(names, c.Strategy) {
		bad("strategy", "unknown strategy %q (want one of %s)", c.Strategy, strings.Join(names, ", "))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		bad("log_level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.MaxBodyBytes < 1024 {
		bad("max_body_bytes", "must be at least 1024, got %d", c.MaxBodyBytes)
	}
	if c.EMAAlpha <= 0 || c.EMAAlpha > 1 {
		bad("ema_alpha", "must be in (0, 1], got %g", c.EMAAlpha)
	}
	if c.DecisionLogSize < 0 {
		bad("decision_log_size", "must not be negative")
	}
	if c.DecisionLogCandidates < 0 {
		bad("decision_log_candidates", "must not be negative")
	}
	if c.RefreshInterval.D() <= 0 {
		bad("refresh_interval", "must be positive")
	}
	if c.ClaimLease.D() < 500*time.Millisecond || c.ClaimLease.D() > 30*time.Second {
		bad("claim_lease", "must be between 500ms and 30s, got %s", c.ClaimLease)
	}
	if c.Redis.URL != "" && len(c.Redis.Addrs) > 0 {
		bad("redis", "set url or addrs, not both")
	}
	if c.Redis.URL != "" && !strings.HasPrefix(c.Redis.URL, "redis://") && !strings.HasPrefix(c.Redis.URL, "rediss://") {
		bad("redis.url", "want redis://host:port/db or rediss://..., got %q", c.Redis.URL)
	}
	if c.Redis.MasterName != "" && len(c.Redis.Addrs) == 0 {
		bad("redis.master_name", "needs redis.addrs (the Sentinel addresses)")
	}
	if c.Queue.MaxQueueSize < 0 {
		bad("queue.max_queue_size", "must not be negative")
	}
	if c.Queue.CriticalMultiplier < 1 {
		bad("queue.critical_multiplier", "must be at least 1, got %g", c.Queue.CriticalMultiplier)
	}
	if c.Queue.BatchShare < 0 || c.Queue.BatchShare > 1 {
		bad("queue.batch_share", "must be in [0, 1], got %g", c.Queue.BatchShare)
	}
	for _, p := range state.Priorities() {
		if d := c.Queue.Timeout.For(p); d <= 0 || d > time.Hour {
			bad("queue.timeout."+string(p), "must be between 0 and 1h, got %s", Duration(d))
		}
	}
	if c.Queue.MaxConcurrentRequests < 0 {
		bad("queue.max_concurrent_requests", "must not be negative")
	}
	c.validateAuth(bad)
	c.validateFairness(bad)
	c.SLO.validate(bad)
	c.Tracing.validate(bad)
	c.LoRA.validate(c.Workers, bad)
	c.Disaggregation.validate(bad)
	if c.Telemetry.ScrapeInterval.D() < 10*time.Millisecond {
		bad("telemetry.scrape_interval", "must be at least 10ms")
	}
	if c.Telemetry.ScrapeTimeout.D() <= 0 || c.Telemetry.ScrapeTimeout.D() > c.Telemetry.ScrapeInterval.D() {
		bad("telemetry.scrape_timeout", "must be positive and at most scrape_interval")
	}
	if c.Telemetry.StaleAfter.D() < c.Telemetry.ScrapeInterval.D() {
		bad("telemetry.stale_after", "must be at least scrape_interval")
	}
	if c.Health.CheckInterval.D() < 100*time.Millisecond {
		bad("health.check_interval", "must be at least 100ms")
	}
	if c.Health.FailureThreshold < 1 {
		bad("health.failure_threshold", "must be at least 1")
	}
	if c.Health.PassiveFailureThreshold < 1 {
		bad("health.passive_failure_threshold", "must be at least 1")
	}
	if c.Redis.PoolSize < 1 {
		bad("redis.pool_size", "must be at least 1")
	}
	if c.Redis.Timeout.D() <= 0 {
		bad("redis.timeout", "must be positive")
	}
	inPool := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Redis.Pools)) {
		models := c.Redis.Pools[name]
		if !idPattern.MatchString(name) {
			bad("redis.pools", "pool name %q must be letters, digits, '.', '_' or '-'", name)
		}
		for _, m := range models {
			if other, ok := inPool[m]; ok && other != name {
				bad("redis.pools", "model %s is in pools %s and %s", m, other, name)
			}
			inPool[m] = name
		}
	}
	for _, w := range c.Workers {
		pool := ""
		for i, m := range w.Models {
			if i > 0 && inPool[m] != pool {
				bad("redis.pools", "worker %s serves models of pools %q and %q: put them in one pool", w.ID, pool, inPool[m])
				break
			}
			pool = inPool[m]
		}
	}
	if !idPattern.MatchString(c.Redis.KeyPrefix) {
		bad("redis.key_prefix", "%q must be letters, digits, '.', '_' or '-'", c.Redis.KeyPrefix)
	}
	if c.Envoy.Discovery != "static" && c.Envoy.Discovery != "xds" {
		bad("envoy.discovery", "want static or xds, got %q", c.Envoy.Discovery)
	}
	if c.Envoy.Mode != ModeClusterHeader && c.Envoy.Mode != ModeEndpointPicker {
		bad("envoy.mode", "want %s or %s, got %q", ModeClusterHeader, ModeEndpointPicker, c.Envoy.Mode)
	}
	if c.Envoy.Mode == ModeEndpointPicker && c.Envoy.Discovery == "xds" {
		bad("envoy.mode", "endpoint_picker takes endpoints from the gateway (or the rendered pool cluster), not the router's xDS: set envoy.discovery: static")
	}
	if d := c.Discovery; d.Enabled() {
		if d.InferencePool != "" && d.Selector != "" {
			bad("discovery.selector", "set discovery.inference_pool or discovery.selector, not both")
		}
		if _, err := d.Labels(); err != nil {
			bad("discovery.selector", "%v", err)
		}
		if d.Selector != "" && (d.TargetPort <= 0 || d.TargetPort > 65535) {
			bad("discovery.target_port", "a port is needed with discovery.selector, got %d", d.TargetPort)
		}
		if len(d.Models) == 0 {
			bad("discovery.models", "name the models the discovered pods serve")
		}
		if d.MaxConcurrency < 0 {
			bad("discovery.max_concurrency", "must be 0 (none) or more, got %d", d.MaxConcurrency)
		}
	}
	if c.Envoy.Fallbacks < 0 || c.Envoy.Fallbacks > 16 {
		bad("envoy.fallbacks", "must be in [0, 16], got %d", c.Envoy.Fallbacks)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls.cert_file", "tls.cert_file and tls.key_file go together")
	}
	if c.Envoy.NumRetries < 0 || c.Envoy.NumRetries > 10 {
		bad("envoy.num_retries", "must be in [0, 10], got %d", c.Envoy.NumRetries)
	}
	if c.Envoy.RouteTimeout.D() <= 0 {
		bad("envoy.route_timeout", "must be positive")
	}
	if c.Envoy.ConnectTimeout.D() <= 0 {
		bad("envoy.connect_timeout", "must be positive")
	}
	if c.Envoy.MessageTimeout.D() < time.Millisecond {
		bad("envoy.message_timeout", "must be at least 1ms")
	}
	if c.InferenceAware.MinSamples < 1 {
		bad("inference_aware.min_samples", "must be at least 1")
	}
	if c.InferenceAware.LoadPenalty < 0 {
		bad("inference_aware.load_penalty", "must not be negative")
	}
	if c.Scoring.JobCostScale.D() <= 0 {
		bad("scoring.job_cost_scale", "must be positive")
	}
	if c.Scoring.Weights.Prefix < 0 || c.Scoring.Weights.TokenLoad < 0 {
		bad("scoring.weights", "prefix and token_load must not be negative")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Scoring.Weights.Terms)) {
		if _, ok := scoring.LookupTerm(k); !ok {
			bad("scoring.weights."+k, "no such term (want one of %s)", strings.Join(weightKeys(), ", "))
		}
	}
	if c.Scoring.TTFTSLO.D() < 0 || c.Scoring.PrefillTokensPerSecond < 0 || c.Scoring.MaxPrefixBlocks < 0 {
		bad("scoring", "ttft_slo, prefill_tokens_per_second and max_prefix_blocks must not be negative")
	}
	if c.Scoring.KVBlocks < 1 {
		bad("scoring.kv_blocks", "must be at least 1, got %d", c.Scoring.KVBlocks)
	}
	c.AdaptiveCaps.validate(bad)
	c.validateWorkers(bad, checkAddr)
	return errors.Join(errs...)
}

func (c *Config) validateWorkers(bad func(string, string, ...any), checkAddr func(string, string)) {
	seenID := map[string]bool{}
	seenAddr := map[string]string{}
	for i, w := range c.Workers {
		key := fmt.Sprintf("workers[%d]", i)
		switch {
		case w.ID == "":
			bad(key+".id", "required")
		case !idPattern.MatchString(w.ID):
			bad(key+".id", "%q must be 1-63 letters, digits, '.', '_' or '-' (it is an Envoy cluster name)", w.ID)
		case strings.HasPrefix(w.ID, "pool.") || strings.Contains(w.ID, ".via."):
			bad(key+".id", "%q uses a name the rendered Envoy config reserves ('pool.' prefix, '.via.')", w.ID)
		case seenID[w.ID]:
			bad(key+".id", "duplicate worker id %q", w.ID)
		}
		seenID[w.ID] = true
		checkAddr(key+".address", w.Address)
		if other, dup := seenAddr[w.Address]; dup && w.Address != "" {
			bad(key+".address", "%s is also the address of worker %q", w.Address, other)
		}
		seenAddr[w.Address] = w.ID
		if len(w.Models) == 0 {
			bad(key+".models", "at least one model is required")
		}
		for j, m := range w.Models {
			if strings.TrimSpace(m) == "" || len(m) > 200 {
				bad(fmt.Sprintf("%s.models[%d]", key, j), "model names must be 1-200 characters")
			}
		}
		if w.KVBlocks < 0 || w.PrefillTokensPerSecond < 0 {
			bad(key, "kv_blocks and prefill_tokens_per_second must not be negative")
		}
		if w.MaxConcurrency < 0 {
			bad(key+".max_concurrency", "must be 0 (none) or more, got %d", w.MaxConcurrency)
		}
		if _, err := state.ParseRole(w.Role); err != nil {
			bad(key+".role", "%v", err)
		}
		if w.MetricsFormat != "" && !slices.Contains([]string{"vllm", "sglang", "llamacpp", "trtllm", "none"}, w.MetricsFormat) {
			bad(key+".metrics_format", "want vllm, sglang, llamacpp, trtllm or none, got %q", w.MetricsFormat)
		}
		if (w.DCGMURL == "") != (w.DCGMGPU == "") {
			bad(key+".dcgm_gpu", "dcgm_url and dcgm_gpu go together")
		}
	}
}

func (c *Config) validateAuth(bad func(string, string, ...any)) {
	seen := map[string]bool{}
	for i, k := range c.Auth.Keys {
		key := fmt.Sprintf("auth.keys[%d]", i)
		switch {
		case len(k.Key) < 8:
			bad(key+".key", "must be at least 8 characters")
		case seen[k.Key]:
			bad(key+".key", "duplicate key")
		}
		seen[k.Key] = true
		if k.Tenant == "" {
			bad(key+".tenant", "required")
		}
		if !k.MaxPriority.OrStandard().Valid() {
			bad(key+".max_priority", "want critical, standard or batch, got %q", k.MaxPriority)
		}
		validateKeyBounds(key, k, bad)
	}
	for name, p := range c.Auth.Objectives {
		if name == "" || !p.Valid() {
			bad("auth.objectives."+name, "want critical, standard or batch, got %q", p)
		}
	}
}
