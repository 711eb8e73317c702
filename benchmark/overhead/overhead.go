package overhead

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// ClosedOptions configure the overhead comparison.
type ClosedOptions struct {
	BinDir      string // holds llm-router and gpusim
	Requests    int    // per configuration
	Concurrency int
	Rounds      int // the configurations alternate this many times
	MaxTokens   int
	PromptBytes int
	Out         io.Writer
	ResultsDir  string // a run folder with overhead-closed.json, and latest/, when set
}

// ClosedReport compares Envoy straight to a zero-latency gpusim against
// Envoy with the router in front of the same gpusim.
type ClosedReport struct {
	Requests     int      `json:"requests_per_config"`
	Concurrency  int      `json:"concurrency"`
	Configs      []Config `json:"configs"`
	AddedP50     float64  `json:"added_p50_ms"` // router (admission off) over direct
	AddedP99     float64  `json:"added_p99_ms"`
	NoopP50      float64  `json:"noop_added_p50_ms"` // no-op ext_proc over direct: the floor
	NoopP99      float64  `json:"noop_added_p99_ms"`
	AdmissionP50 float64  `json:"admission_p50_ms"` // admission on over off, never waiting
	AdmissionP99 float64  `json:"admission_p99_ms"`
	Machine      string   `json:"machine"`
}

// Config is one configuration's latency distribution.
type Config struct {
	Name   string  `json:"name"`
	OK     int     `json:"ok"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	RPS    float64 `json:"requests_per_second"`
}

// overheadTarget is one configuration in front of the instant gpusim.
type overheadTarget struct {
	name, url, key string
	pids           map[string]int
	// extproc names the ext_proc server's process in pids ("" for Envoy
	// alone): its CPU per request is reported.
	extproc string
}

// Configuration names of the overhead benchmark.
const (
	configDirect = "envoy -> gpusim"
	configNoop   = "envoy + no-op ext_proc"
	configRouter = "envoy + llm-router, admission off"
)

// overheadStack is the instant gpusim and every configuration in front of
// it, all started.
type overheadStack struct {
	targets []overheadTarget
	gpuPid  int
	stops   []func()
}

func (s *overheadStack) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

// startOverheadStack starts one instant gpusim, an Envoy routing straight to
// it, an Envoy asking the no-op ext_proc server (the floor: the router's
// rendered config, every phase answered at once), and Envoys asking a
// router with admission off (no queue, no auth) and, when admission is set,
// on (queue and API keys, as deployed). No request ever waits: the worker's
// cap is far above any concurrency, so the admission row shows what the
// admission path costs a request that never queues.
func startOverheadStack(ctx context.Context, binDir, dir string, admission, ablate bool) (st *overheadStack, err error) {
	st = &overheadStack{}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	envoyBin, err := stack.EnvoyBinary()
	if err != nil {
		return st, err
	}
	workerAddr, err := stack.FreeAddr()
	if err != nil {
		return st, err
	}
	g, err := stack.StartGpusim(ctx, filepath.Join(binDir, "gpusim"), "--listen", workerAddr, "--id", "gpu-0", "--model", "bench", "--ttft-ms", "0", "--tokens-per-second", "0")
	if err != nil {
		return st, err
	}
	st.stops = append(st.stops, func() { g.Stop(2 * time.Second) })
	st.gpuPid = g.Pid()

	const key = "sk-bench-overhead-key"
	base := config.Default()
	base.LogLevel = "warn"
	base.Workers = []config.Worker{{ID: "gpu-0", Address: workerAddr, Models: []string{"bench"}, MaxConcurrency: 1 << 20}}

	addrs := stack.MustFreeAddrs(2)
	direct := base
	direct.Envoy.Listen, direct.Envoy.Admin = addrs[0], addrs[1]
	directYAML, err := envoy.RenderBaseline(direct, "ROUND_ROBIN")
	if err != nil {
		return st, err
	}
	evD, err := stack.StartEnvoy(ctx, envoyBin, dir, directYAML, direct.Envoy.Admin, direct.Envoy.Listen)
	if err != nil {
		return st, err
	}
	st.stops = append(st.stops, func() { evD.Stop(3 * time.Second) })
	st.targets = append(st.targets, overheadTarget{name: configDirect, url: "http://" + direct.Envoy.Listen, pids: map[string]int{"envoy": evD.Pid()}})

	noop, err := startNoop(ctx, envoyBin, binDir, dir, base, configNoop)
	if err != nil {
		return st, err
	}
	st.stops = append(st.stops, noop.stop)
	st.targets = append(st.targets, noop.target)

	variants := []struct {
		name      string
		admission bool
	}{{configRouter, false}}
	if admission {
		variants = append(variants, struct {
			name      string
			admission bool
		}{"envoy + llm-router, admission on", true})
	}
	for _, v := range variants {
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
		cfgPath := filepath.Join(dir, fmt.Sprintf("router-%d.yaml", len(st.targets)))
		if err := fleet.WriteRouterConfig(cfgPath, cfg); err != nil {
			return st, err
		}
		router, err := stack.StartRouter(ctx, filepath.Join(binDir, "llm-router"), cfgPath, cfg.AdminListen, cfg.ExtProcListen)
		if err != nil {
			return st, err
		}
		st.stops = append(st.stops, func() { router.Stop(5 * time.Second) })
		yaml, err := envoy.Render(cfg)
		if err != nil {
			return st, err
		}
		ev, err := stack.StartEnvoy(ctx, envoyBin, dir, yaml, cfg.Envoy.Admin, cfg.Envoy.Listen)
		if err != nil {
			return st, err
		}
		st.stops = append(st.stops, func() { ev.Stop(3 * time.Second) })
		st.targets = append(st.targets, overheadTarget{
			name: v.name, url: "http://" + cfg.Envoy.Listen, key: k,
			pids: map[string]int{"envoy": ev.Pid(), "llm-router": router.Pid()}, extproc: "llm-router",
		})
		if ablate && !v.admission {
			if err := startAblations(ctx, st, envoyBin, binDir, dir, cfg, router.Pid()); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// startedTarget is a configuration and how to stop its processes.
type startedTarget struct {
	target overheadTarget
	stop   func()
}

// startNoop starts the no-op ext_proc server (llm-bench noop-extproc, from
// binDir) and an Envoy with the router's rendered config asking it.
func startNoop(ctx context.Context, envoyBin, binDir, dir string, base config.Config, name string, args ...string) (startedTarget, error) {
	cfg := base
	a := stack.MustFreeAddrs(3)
	cfg.ExtProcListen, cfg.Envoy.Listen, cfg.Envoy.Admin = a[0], a[1], a[2]
	cfg.Envoy.ExtProcAddrs = []string{a[0]}
	p, err := stack.Start("noop-extproc", filepath.Join(binDir, "llm-bench"),
		append([]string{"noop-extproc", "--listen", a[0], "--cluster", envoy.ClusterFor(cfg.Workers[0].ID, cfg.Workers[0].Models[0])}, args...), nil)
	if err != nil {
		return startedTarget{}, err
	}
	if err := stack.WaitTCP(ctx, a[0], 10*time.Second); err != nil {
		p.Stop(time.Second)
		return startedTarget{}, fmt.Errorf("noop-extproc: %w\n%s", err, p.Log())
	}
	yaml, err := envoy.Render(cfg)
	if err != nil {
		p.Stop(time.Second)
		return startedTarget{}, err
	}
	ev, err := stack.StartEnvoy(ctx, envoyBin, dir, yaml, cfg.Envoy.Admin, cfg.Envoy.Listen)
	if err != nil {
		p.Stop(time.Second)
		return startedTarget{}, err
	}
	return startedTarget{
		target: overheadTarget{
			name: name, url: "http://" + cfg.Envoy.Listen,
			pids: map[string]int{"envoy": ev.Pid(), "noop-extproc": p.Pid()}, extproc: "noop-extproc",
		},
		stop: func() { ev.Stop(3 * time.Second); p.Stop(2 * time.Second) },
	}, nil
}

// Closed runs the closed-loop comparison: identical small chat requests
// from o.Concurrency clients through each configuration, alternating
// between them so that machine noise hits all alike.
func Closed(ctx context.Context, o ClosedOptions) (*ClosedReport, error) {
	dir, err := os.MkdirTemp("", "llmr-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := startOverheadStack(ctx, o.BinDir, dir, true, false)
	if err != nil {
		return nil, err
	}
	defer st.stop()
	targets := st.targets

	gen := func(int) loadgen.Request {
		return loadgen.Request{Model: "bench", MaxTokens: o.MaxTokens, PromptTokens: o.PromptBytes / 5}
	}
	all := make([][]loadgen.Result, len(targets))
	elapsed := make([]time.Duration, len(targets))
	clients := make([]*loadgen.Client, len(targets))
	for i, t := range targets {
		clients[i] = loadgen.NewClient(t.url, o.Concurrency, t.key)
		defer clients[i].Close()
		loadgen.RunClosed(ctx, clients[i], o.Concurrency*4, o.Concurrency, gen) // warm connections and caches
	}
	per := o.Requests / o.Rounds
	for round := 0; round < o.Rounds; round++ {
		for i := range targets {
			start := time.Now()
			all[i] = append(all[i], loadgen.RunClosed(ctx, clients[i], per, o.Concurrency, gen)...)
			elapsed[i] += time.Since(start)
			fmt.Fprintf(o.Out, "round %d/%d %-36s done\n", round+1, o.Rounds, targets[i].name)
		}
	}
	rep := &ClosedReport{Requests: per * o.Rounds, Concurrency: o.Concurrency, Machine: host.Machine()}
	for i, t := range targets {
		lat := stats.Latencies(all[i])
		rep.Configs = append(rep.Configs, Config{
			Name: t.name, OK: len(lat), Failed: len(all[i]) - len(lat),
			P50: stats.Ms(stats.Percentile(lat, 50)), P90: stats.Ms(stats.Percentile(lat, 90)), P99: stats.Ms(stats.Percentile(lat, 99)), Max: stats.Ms(stats.Percentile(lat, 100)),
			RPS: float64(len(all[i])) / elapsed[i].Seconds(),
		})
	}
	direct, noop, router, admission := rep.Configs[0], rep.Configs[1], rep.Configs[2], rep.Configs[3]
	rep.NoopP50, rep.NoopP99 = noop.P50-direct.P50, noop.P99-direct.P99
	rep.AddedP50, rep.AddedP99 = router.P50-direct.P50, router.P99-direct.P99
	rep.AdmissionP50, rep.AdmissionP99 = admission.P50-router.P50, admission.P99-router.P99
	if o.ResultsDir != "" {
		dir, err := record.Folder(o.ResultsDir, "overhead-closed", time.Now())
		if err != nil {
			return rep, err
		}
		if err := record.WriteJSON(filepath.Join(dir, "overhead-closed.json"), rep); err != nil {
			return rep, err
		}
		if err := record.Publish(o.ResultsDir, dir, []string{"overhead-closed.json"}); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Print writes the report as a Markdown table.
func (r *ClosedReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\n%d small chat requests per configuration, concurrency %d, on %s\n\n", r.Requests, r.Concurrency, r.Machine)
	fmt.Fprintln(w, "| configuration | ok | failed | p50 ms | p90 ms | p99 ms | max ms | req/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, c := range r.Configs {
		fmt.Fprintf(w, "| %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %.0f |\n", c.Name, c.OK, c.Failed, c.P50, c.P90, c.P99, c.Max, c.RPS)
	}
	fmt.Fprintf(w, "\nadded by a no-op ext_proc (the floor): p50 %+.3f ms, p99 %+.3f ms\n", r.NoopP50, r.NoopP99)
	fmt.Fprintf(w, "added by the router (admission off): p50 %+.3f ms, p99 %+.3f ms\n", r.AddedP50, r.AddedP99)
	fmt.Fprintf(w, "added by admission (queue + auth) for requests that never wait: p50 %+.3f ms, p99 %+.3f ms\n", r.AdmissionP50, r.AdmissionP99)
}

func logf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
