package config

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

const issueExample = `
extproc_listen: 127.0.0.1:9002
admin_listen: 127.0.0.1:9090
strategy: scored        # round_robin | least_loaded | latency_based | inference_aware | scored
envoy:
  listen: 127.0.0.1:8080   # where the rendered Envoy config listens
  admin: 127.0.0.1:9901
workers:
  - id: gpu-0               # also its Envoy cluster name
    address: 127.0.0.1:8001
    models: [llama-3-8b]
    zone: zone-a
    max_concurrency: 4
`

func noEnv(string) string { return "" }

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestTheDocumentedExampleLoads(t *testing.T) {
	cfg, err := Parse([]byte(issueExample), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Strategy != "scored" || len(cfg.Workers) != 1 || cfg.Workers[0].MaxConcurrency != 4 {
		t.Fatalf("unexpected config %+v", cfg)
	}
	if len(cfg.Envoy.ExtProcAddrs) != 1 || cfg.Envoy.ExtProcAddrs[0] != "127.0.0.1:9002" {
		t.Fatalf("extproc_addrs default = %v", cfg.Envoy.ExtProcAddrs)
	}
	if cfg.InferenceAware.MinSamples != 3 || cfg.EMAAlpha != 0.2 || cfg.Scoring.Weights.Active != 100 {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown top-level key", "strategyy: scored\n", "unknown key strategyy"},
		{"unknown nested key", "envoy:\n  listn: 1.2.3.4:5\n", "unknown key listn"},
		{"bad strategy", "strategy: fastest\n", "strategy: unknown strategy \"fastest\""},
		{"wrong type", "max_body_bytes: lots\n", "max_body_bytes"},
		{"bad duration", "shutdown_grace: soon\n", "not a duration"},
		{"bad address", "admin_listen: nowhere\n", "admin_listen: want host:port"},
		{"negative cap", "workers:\n- id: w\n  address: 127.0.0.1:1\n  models: [m]\n  max_concurrency: -1\n", "workers[0].max_concurrency: must be 0 (none) or more"},
		{"no models", "workers:\n- id: w\n  address: 127.0.0.1:1\n  max_concurrency: 1\n", "workers[0].models"},
		{"duplicate id", "workers:\n- {id: w, address: 127.0.0.1:1, models: [m], max_concurrency: 1}\n- {id: w, address: 127.0.0.1:2, models: [m], max_concurrency: 1}\n", "workers[1].id: duplicate"},
		{"reserved id", "workers:\n- {id: pool.x, address: 127.0.0.1:1, models: [m], max_concurrency: 1}\n", "workers[0].id"},
		{"bad id", "workers:\n- {id: 'a b', address: 127.0.0.1:1, models: [m], max_concurrency: 1}\n", "workers[0].id"},
		{"alpha out of range", "ema_alpha: 1.5\n", "ema_alpha"},
		{"model in two pools", "redis:\n  pools: {a: [m], b: [m]}\n", "redis.pools: model m is in pools a and b"},
		{"zero default objective", "slo:\n  ttft: 0s\n", "slo.ttft: must be above 0 and at most 1h"},
		{"absurd bound", "slo:\n  min_tpot: 2h\n", "slo.min_tpot: must be above 0 and at most 1h"},
		{"objective per unknown priority", "slo:\n  models:\n    m:\n      urgent: {ttft: 1s}\n", "slo.models.m.urgent: want a priority"},
		{"absurd model objective", "slo:\n  models:\n    m:\n      batch: {tpot: 90m}\n", "slo.models.m.batch.tpot"},
		{"absurd llm-d objective", "slo:\n  objectives:\n    chat: {ttft: 5h}\n", "slo.objectives.chat.ttft"},
		{"unknown slo key", "slo:\n  models:\n    m:\n      batch: {itl: 1s}\n", "unknown key itl"},
		{"absurd key bound", "auth:\n  keys:\n  - {key: sk-12345678, tenant: t, min_ttft_slo: 2h}\n", "auth.keys[0].min_ttft_slo: must be 0"},
		{"worker across pools", "redis:\n  pools: {a: [m]}\nworkers:\n- {id: w, address: 127.0.0.1:1, models: [m, n], max_concurrency: 1}\n", "worker w serves models of pools \"a\" and \"\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// The slo section's per-model and per-objective values load as written,
// beside the defaults.
func TestSLOConfig(t *testing.T) {
	cfg, err := Parse([]byte("slo:\n  tpot: 80ms\n  models:\n    m:\n      critical: {ttft: 800ms, tpot: 0.04}\n  objectives:\n    chat: {ttft: 1.2s}\nauth:\n  keys:\n  - {key: sk-12345678, tenant: t, min_ttft_slo: 100ms}\n"), envOf(map[string]string{"SLO_MIN_TPOT_SECONDS": "10ms"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.SLO
	if s.TTFT.D() != 2*time.Second || s.TPOT.D() != 80*time.Millisecond || s.MinTTFT.D() != 500*time.Millisecond || s.MinTPOT.D() != 10*time.Millisecond {
		t.Fatalf("defaults and overrides: %+v", s)
	}
	if m := s.Models["m"][state.PriorityCritical]; m.TTFT.D() != 800*time.Millisecond || m.TPOT.D() != 40*time.Millisecond {
		t.Fatalf("model: %+v", m)
	}
	if o := s.Objectives["chat"]; o.TTFT.D() != 1200*time.Millisecond || o.TPOT != 0 {
		t.Fatalf("objective: %+v", o)
	}
	if k := cfg.Auth.Keys[0]; k.MinTTFTSLO.D() != 100*time.Millisecond || k.MinTPOTSLO != 0 {
		t.Fatalf("key: %+v", k)
	}
}

func TestEnvOverridesTheFile(t *testing.T) {
	cfg, err := Parse([]byte(issueExample), envOf(map[string]string{
		"ROUTING_STRATEGY":                  "inference_aware",
		"INFERENCE_AWARE_MIN_SAMPLES":       "7",
		"INFERENCE_AWARE_STALENESS_SECONDS": "12.5",
		"INFERENCE_AWARE_LOAD_PENALTY":      "0.3",
		"MAX_RETRIES":                       "1",
		"NODE_TIMEOUT_SECONDS":              "90",
		"ENVOY_EXTPROC_ADDRS":               "10.0.0.1:9002, 10.0.0.2:9002",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Strategy != "inference_aware" || cfg.InferenceAware.MinSamples != 7 ||
		cfg.InferenceAware.Staleness.D() != 12500*time.Millisecond || cfg.InferenceAware.LoadPenalty != 0.3 ||
		cfg.Envoy.NumRetries != 1 || cfg.Envoy.RouteTimeout.D() != 90*time.Second || len(cfg.Envoy.ExtProcAddrs) != 2 {
		t.Fatalf("env not applied: %+v", cfg)
	}
	_, err = Parse([]byte(issueExample), envOf(map[string]string{"INFERENCE_AWARE_MIN_SAMPLES": "three"}))
	if err == nil || !strings.Contains(err.Error(), "INFERENCE_AWARE_MIN_SAMPLES") {
		t.Fatalf("a bad env value must name the variable: %v", err)
	}
}

func TestVLLMNodesReplaceTheWorkers(t *testing.T) {
	cfg, err := Parse([]byte(issueExample), envOf(map[string]string{
		"VLLM_NODES": "http://localhost:8001,http://localhost:8002",
		"MODEL_NAME": "mistral",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Workers) != 2 || cfg.Workers[1].Address != "localhost:8002" || cfg.Workers[1].Models[0] != "mistral" || cfg.Workers[0].ID != "node-0" {
		t.Fatalf("workers = %+v", cfg.Workers)
	}
	if cfg.Workers[0].MaxConcurrency != 0 {
		t.Fatalf("VLLM_NODES workers have cap %d, want 0 (none) without MAX_CONCURRENCY_PER_NODE", cfg.Workers[0].MaxConcurrency)
	}
}

func TestMaxConcurrencyIsOptional(t *testing.T) {
	cfg, err := Parse([]byte("workers:\n- {id: w, address: 127.0.0.1:1, models: [m]}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers[0].MaxConcurrency != 0 || cfg.Discovery.MaxConcurrency != 0 {
		t.Fatalf("caps %d and discovery %d, want 0 (none) when absent", cfg.Workers[0].MaxConcurrency, cfg.Discovery.MaxConcurrency)
	}
}

func TestEmptyFileIsAllDefaults(t *testing.T) {
	cfg, err := Parse(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ExtProcListen != "127.0.0.1:9002" {
		t.Fatalf("defaults: %+v", cfg)
	}
	// New installs schedule by prediction, with the queue as it was.
	q := cfg.Queue
	if cfg.Strategy != "predicted" || q.MaxQueueSize != 32 || q.Timeout.Critical.D() != 60*time.Second ||
		q.Timeout.Standard.D() != 30*time.Second || q.Timeout.Batch.D() != 15*time.Second {
		t.Fatalf("default strategy %q, queue %+v; want predicted, 32 waiters, 60/30/15 s", cfg.Strategy, q)
	}
}

var updateReadme = flag.Bool("update-readme", false, "rewrite docs/configuration.md's table from Keys")

// TestConfigReferenceDocumentsEveryKey keeps the configuration reference's table (docs/configuration.md) equal
// to Keys (`go test ./internal/config -run ConfigReference -update-readme` rewrites it).
func TestConfigReferenceDocumentsEveryKey(t *testing.T) {
	const start, end = "<!-- config-table:start -->\n", "<!-- config-table:end -->"
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, start), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatal("docs/configuration.md lacks the config-table markers")
	}
	want := readme[:i+len(start)] + MarkdownTable() + readme[j:]
	if *updateReadme {
		if err := os.WriteFile("../../docs/configuration.md", []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != readme {
		t.Fatalf("docs/configuration.md's configuration table is stale: run go test ./internal/config -run ConfigReference -update-readme")
	}
}

// TestKeyDefaultsMatchDefault keeps the documented defaults honest.
func TestKeyDefaultsMatchDefault(t *testing.T) {
	def := Default()
	for _, k := range Keys {
		if k.apply == nil || k.Default == "" || strings.ContainsAny(k.Default, "[-") || k.Path == "auth.enabled" {
			continue
		}
		c := Config{}
		if err := k.apply(&c, k.Default); err != nil {
			t.Fatalf("%s: default %q does not parse: %v", k.Path, k.Default, err)
		}
		d := Default()
		if err := k.apply(&d, k.Default); err != nil {
			t.Fatal(err)
		}
		// Applying the documented default to Default() must change nothing.
		if !equalConfig(d, def) {
			t.Errorf("%s: documented default %q differs from Default()", k.Path, k.Default)
		}
	}
}

func equalConfig(a, b Config) bool {
	return strings.EqualFold(dump(a), dump(b))
}

func dump(c Config) string {
	c.Workers, c.Envoy.ExtProcAddrs = nil, nil
	return strings.ReplaceAll(strings.TrimSpace(fmtConfig(c)), " ", "")
}

func fmtConfig(c Config) string { return fmt.Sprintf("%+v", c) }
