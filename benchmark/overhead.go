package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/llm-router/llm-router/config"
	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/stack"
)

// OverheadOptions configure the overhead comparison.
type OverheadOptions struct {
	BinDir      string // holds llm-router and gpusim
	Requests    int    // per configuration
	Concurrency int
	Rounds      int // the configurations alternate this many times
	MaxTokens   int
	PromptBytes int
	Out         io.Writer
	ResultsDir  string // JSON written here when set
}

// OverheadReport compares Envoy straight to a zero-latency gpusim against
// Envoy with the router in front of the same gpusim.
type OverheadReport struct {
	Requests     int              `json:"requests_per_config"`
	Concurrency  int              `json:"concurrency"`
	Configs      []OverheadConfig `json:"configs"`
	AddedP50     float64          `json:"added_p50_ms"` // router (admission off) over direct
	AddedP99     float64          `json:"added_p99_ms"`
	AdmissionP50 float64          `json:"admission_p50_ms"` // admission on over off, never waiting
	AdmissionP99 float64          `json:"admission_p99_ms"`
	Machine      string           `json:"machine"`
}

// OverheadConfig is one configuration's latency distribution.
type OverheadConfig struct {
	Name   string  `json:"name"`
	OK     int     `json:"ok"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	RPS    float64 `json:"requests_per_second"`
}

// Overhead starts one instant gpusim, an Envoy routing straight to it and
// Envoys asking a router (admission off: no queue, no auth; admission on:
// queue and API keys, as deployed), and sends identical small chat
// requests through each, alternating between them so that machine noise
// hits all alike. No request ever waits: the worker's cap is far above the
// concurrency, so the admission row shows what the admission path costs a
// request that never queues.
func Overhead(ctx context.Context, o OverheadOptions) (*OverheadReport, error) {
	dir, err := os.MkdirTemp("", "llmr-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	envoyBin, err := stack.EnvoyBinary()
	if err != nil {
		return nil, err
	}
	workerAddr, err := stack.FreeAddr()
	if err != nil {
		return nil, err
	}
	g, err := stack.StartGpusim(ctx, filepath.Join(o.BinDir, "gpusim"), "--listen", workerAddr, "--id", "gpu-0", "--model", "bench", "--ttft-ms", "0", "--tokens-per-second", "0")
	if err != nil {
		return nil, err
	}
	defer g.Stop(2 * time.Second)

	const key = "sk-bench-overhead-key"
	type target struct {
		name, url, key string
	}
	var targets []target
	base := config.Default()
	base.LogLevel = "warn"
	base.Workers = []config.Worker{{ID: "gpu-0", Address: workerAddr, Models: []string{"bench"}, MaxConcurrency: 4096}}

	addrs := stack.MustFreeAddrs(2)
	direct := base
	direct.Envoy.Listen, direct.Envoy.Admin = addrs[0], addrs[1]
	directYAML, err := envoy.RenderBaseline(direct, "ROUND_ROBIN")
	if err != nil {
		return nil, err
	}
	evD, err := stack.StartEnvoy(ctx, envoyBin, dir, directYAML, direct.Envoy.Admin, direct.Envoy.Listen)
	if err != nil {
		return nil, err
	}
	defer evD.Stop(3 * time.Second)
	targets = append(targets, target{"envoy -> gpusim", "http://" + direct.Envoy.Listen, ""})

	for _, v := range []struct {
		name      string
		admission bool
	}{{"envoy + llm-router, admission off", false}, {"envoy + llm-router, admission on", true}} {
		cfg := base
		a := stack.MustFreeAddrs(4)
		cfg.ExtProcListen, cfg.AdminListen, cfg.Envoy.Listen, cfg.Envoy.Admin = a[0], a[1], a[2], a[3]
		cfg.Envoy.ExtProcAddrs = []string{a[0]}
		cfg.ReplicaID = v.name
		k := ""
		if v.admission {
			cfg.Auth.Keys = []config.APIKey{{Key: key, Tenant: "bench", MaxPriority: "critical"}}
			k = key
		} else {
			cfg.Queue.MaxQueueSize = 0
		}
		cfgPath := filepath.Join(dir, fmt.Sprintf("router-%d.yaml", len(targets)))
		if err := writeRouterConfig(cfgPath, cfg); err != nil {
			return nil, err
		}
		router, err := stack.StartRouter(ctx, filepath.Join(o.BinDir, "llm-router"), cfgPath, cfg.AdminListen, cfg.ExtProcListen)
		if err != nil {
			return nil, err
		}
		defer router.Stop(5 * time.Second)
		yaml, err := envoy.Render(cfg)
		if err != nil {
			return nil, err
		}
		ev, err := stack.StartEnvoy(ctx, envoyBin, dir, yaml, cfg.Envoy.Admin, cfg.Envoy.Listen)
		if err != nil {
			return nil, err
		}
		defer ev.Stop(3 * time.Second)
		targets = append(targets, target{v.name, "http://" + cfg.Envoy.Listen, k})
	}

	gen := func(int) Request {
		return Request{Model: "bench", MaxTokens: o.MaxTokens, PromptTokens: o.PromptBytes / 5}
	}
	all := make([][]Result, len(targets))
	elapsed := make([]time.Duration, len(targets))
	clients := make([]*Client, len(targets))
	for i, t := range targets {
		clients[i] = NewClient(t.url, o.Concurrency, t.key)
		defer clients[i].Close()
		RunClosed(ctx, clients[i], o.Concurrency*4, o.Concurrency, gen) // warm connections and caches
	}
	per := o.Requests / o.Rounds
	for round := 0; round < o.Rounds; round++ {
		for i := range targets {
			start := time.Now()
			all[i] = append(all[i], RunClosed(ctx, clients[i], per, o.Concurrency, gen)...)
			elapsed[i] += time.Since(start)
			fmt.Fprintf(o.Out, "round %d/%d %-36s done\n", round+1, o.Rounds, targets[i].name)
		}
	}
	rep := &OverheadReport{Requests: per * o.Rounds, Concurrency: o.Concurrency, Machine: Machine()}
	for i, t := range targets {
		lat := Latencies(all[i])
		rep.Configs = append(rep.Configs, OverheadConfig{
			Name: t.name, OK: len(lat), Failed: len(all[i]) - len(lat),
			P50: ms(Percentile(lat, 50)), P90: ms(Percentile(lat, 90)), P99: ms(Percentile(lat, 99)), Max: ms(Percentile(lat, 100)),
			RPS: float64(len(all[i])) / elapsed[i].Seconds(),
		})
	}
	rep.AddedP50 = rep.Configs[1].P50 - rep.Configs[0].P50
	rep.AddedP99 = rep.Configs[1].P99 - rep.Configs[0].P99
	rep.AdmissionP50 = rep.Configs[2].P50 - rep.Configs[1].P50
	rep.AdmissionP99 = rep.Configs[2].P99 - rep.Configs[1].P99
	if o.ResultsDir != "" {
		if err := writeJSON(filepath.Join(o.ResultsDir, "overhead.json"), rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Print writes the report as a Markdown table.
func (r *OverheadReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\n%d small chat requests per configuration, concurrency %d, on %s\n\n", r.Requests, r.Concurrency, r.Machine)
	fmt.Fprintln(w, "| configuration | ok | failed | p50 ms | p90 ms | p99 ms | max ms | req/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, c := range r.Configs {
		fmt.Fprintf(w, "| %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %.0f |\n", c.Name, c.OK, c.Failed, c.P50, c.P90, c.P99, c.Max, c.RPS)
	}
	fmt.Fprintf(w, "\nadded by the router (admission off): p50 %+.3f ms, p99 %+.3f ms\n", r.AddedP50, r.AddedP99)
	fmt.Fprintf(w, "added by admission (queue + auth) for requests that never wait: p50 %+.3f ms, p99 %+.3f ms\n", r.AdmissionP50, r.AdmissionP99)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}
