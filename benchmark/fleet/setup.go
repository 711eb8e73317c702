package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring/emulate"
	"github.com/llm-router/llm-router/test/stack"
)

// Setup is one configuration under test: Envoy alone with a load-balancing
// policy, or Envoy asking llm-router replicas with a strategy.
type Setup struct {
	// Name labels the setup in tables and plots.
	Name string `json:"name"`
	// LBPolicy is Envoy's policy when the router is not used (ROUND_ROBIN,
	// LEAST_REQUEST); empty for router setups.
	LBPolicy string `json:"envoy_lb_policy,omitempty"`
	// Strategy is the router's strategy; empty for Envoy alone.
	Strategy string `json:"strategy,omitempty"`
	// Replicas is the router replicas behind the one Envoy (0 or 1: one,
	// in-memory store; more share a redis-server). Each replica keeps its
	// own in-process state, such as the prefix indexes of the peers'
	// emulations.
	Replicas int `json:"replicas,omitempty"`
	// Settings are config keys set on every replica, "path=value"
	// (scoring.weights.prefix=100): variants of one strategy.
	Settings []string `json:"settings,omitempty"`
	// Caps is the max_concurrency the setup gives its workers: CapsNone
	// (also when empty), CapsBatchLimit or CapsSLOSized.
	Caps string `json:"caps,omitempty"`
	// CapScale multiplies every SLO-sized cap (0: 1): a cap guessed too
	// high or too low, the case adaptive caps are for.
	CapScale float64 `json:"cap_scale,omitempty"`
}

// The caps a router setup runs with, as `caps=` names them in --setups.
const (
	// CapsNone is no cap (max_concurrency 0): what a new install runs.
	CapsNone = "none"
	// CapsBatchLimit is each engine's own batch limit (GPU.BatchLimit,
	// vLLM's max_num_seqs): a number an operator reads from the engine's
	// configuration.
	CapsBatchLimit = "batch-limit"
	// CapsSLOSized is the benchmark's offline caps (GPU.Cap): each GPU's
	// profile replayed on the trace against the SLO, which no operator can
	// do for their own traffic.
	CapsSLOSized = "slo-sized"
)

// CapModes lists the caps= values besides xF.
func CapModes() []string { return []string{CapsNone, CapsBatchLimit, CapsSLOSized} }

// MaxConcurrency is the router's max_concurrency for g under the setup's
// caps; 0 is no cap.
func (s Setup) MaxConcurrency(g GPU) int {
	switch s.Caps {
	case CapsBatchLimit:
		return g.BatchLimit
	case CapsSLOSized:
		f := s.CapScale
		if f <= 0 {
			f = 1
		}
		return max(1, int(math.Round(f*float64(g.Cap))))
	}
	return 0
}

// WithCaps is s with caps (a CapModes value) and its name saying so;
// CapsNone, the default, leaves the name alone.
func (s Setup) WithCaps(caps string) Setup {
	s.Caps = caps
	if caps != "" && caps != CapsNone {
		s.Name += " caps=" + caps
	}
	return s
}

// Router reports whether the setup runs llm-router.
func (s Setup) Router() bool { return s.LBPolicy == "" }

// Emulation reports whether the setup's strategy emulates another
// router's scheduler (a peer) rather than being one of llm-router's own.
func (s Setup) Emulation() bool {
	return slices.Contains(emulate.Names(), s.Strategy)
}

// routerCommand is the binary a router replica of the setup runs, with
// `serve --config FILE`. The product's strategies run in llm-router, the
// binary users run. The emulations of other schedulers are registered
// only where scoring/emulate is linked, which llm-router never is:
// `llm-bench serve` runs the same router (app.Run) with them registered.
func (s Setup) routerCommand() string {
	if s.Emulation() {
		return "llm-bench"
	}
	return "llm-router"
}

// FastScrape reports whether the strategy emulates the Gateway API
// Inference Extension, which scrapes the workers' metrics every 50 ms.
func (s Setup) FastScrape() bool {
	return s.Strategy == emulate.QueueKVMaxScore || s.Strategy == emulate.PrefixQueueKVMaxScore
}

// EnvoySetup and RouterSetup name setups uniformly.
func EnvoySetup(policy string) Setup {
	return Setup{Name: "envoy " + policy, LBPolicy: policy}
}

// RouterSetup is Envoy with llm-router using strategy.
func RouterSetup(strategy string) Setup {
	return Setup{Name: "router " + strategy, Strategy: strategy}
}

// RouterReplicasSetup is Envoy with n llm-router replicas using strategy.
func RouterReplicasSetup(strategy string, n int) Setup {
	if n <= 1 {
		return RouterSetup(strategy)
	}
	return Setup{Name: fmt.Sprintf("router %s x%d", strategy, n), Strategy: strategy, Replicas: n}
}

// Running is a started setup: the URL clients use, the processes to meter
// and a stop function.
type Running struct {
	// URL is where clients send requests (Envoy's listener).
	URL string
	// PIDs are the processes to meter, by name (envoy, llm-router N).
	PIDs map[string]int
	// Admins are the router replicas' admin addresses.
	Admins  []string
	stopped []func()
}

// Stop stops the setup's processes, last started first.
func (r *Running) Stop() {
	for i := len(r.stopped) - 1; i >= 0; i-- {
		r.stopped[i]()
	}
	r.stopped = nil
}

// Env is what starting setups needs: binaries and a scratch directory.
type Env struct {
	binDir   string
	envoyBin string
	dir      string
}

func NewEnv(binDir, dir string) (Env, error) {
	bin, err := stack.EnvoyBinary()
	if err != nil {
		return Env{}, err
	}
	return Env{binDir: binDir, envoyBin: bin, dir: dir}, nil
}

// RouterOptions shape the router replicas of a setup.
type RouterOptions struct {
	// Replicas is how many router replicas sit behind the one Envoy (0: 1).
	Replicas int
	// RedisAddr is the replicas' shared store; empty: in-memory (one
	// replica only).
	RedisAddr string
	// Mutate, when set, edits each replica's config last.
	Mutate func(*config.Config)
}

// start brings up s in front of workers. A router setup gets
// o.Replicas replicas behind one Envoy that lists all of them.
func (e Env) Start(ctx context.Context, s Setup, workers []config.Worker, o RouterOptions) (rs *Running, err error) {
	rs = &Running{PIDs: map[string]int{}}
	defer func() {
		if err != nil {
			rs.Stop()
			rs = nil
		}
	}()
	base := config.Default()
	base.LogLevel = "warn"
	base.Workers = workers
	a := stack.MustFreeAddrs(2)
	base.Envoy.Listen, base.Envoy.Admin = a[0], a[1]
	var yaml []byte
	if !s.Router() {
		if yaml, err = envoy.RenderBaseline(base, s.LBPolicy); err != nil {
			return rs, err
		}
	} else {
		if o.Replicas < 1 {
			o.Replicas = 1
		}
		if o.Replicas > 1 && o.RedisAddr == "" {
			return rs, errors.New("several replicas need a shared redis")
		}
		var cfgs []config.Config
		var extprocs []string
		for i := 0; i < o.Replicas; i++ {
			cfg := base
			cfg.Strategy = s.Strategy
			ra := stack.MustFreeAddrs(2)
			cfg.ExtProcListen, cfg.AdminListen = ra[0], ra[1]
			cfg.ReplicaID = fmt.Sprintf("bench-%d", i)
			if o.RedisAddr != "" {
				cfg.Redis.URL = "redis://" + o.RedisAddr + "/0"
			}
			for _, kv := range s.Settings {
				path, value, _ := strings.Cut(kv, "=")
				if err := config.Set(&cfg, path, value); err != nil {
					return rs, fmt.Errorf("setup %s: %w", s.Name, err)
				}
			}
			if o.Mutate != nil {
				o.Mutate(&cfg)
			}
			cfgs = append(cfgs, cfg)
			extprocs = append(extprocs, cfg.ExtProcListen)
		}
		for i := range cfgs {
			cfgs[i].Envoy.ExtProcAddrs = extprocs
			path := filepath.Join(e.dir, fmt.Sprintf("router-%d-%d.yaml", time.Now().UnixNano(), i))
			if err := WriteRouterConfig(path, cfgs[i]); err != nil {
				return rs, err
			}
			r, err := stack.StartRouter(ctx, filepath.Join(e.binDir, s.routerCommand()), path, cfgs[i].AdminListen, cfgs[i].ExtProcListen)
			if err != nil {
				return rs, fmt.Errorf("start router %d: %w", i, err)
			}
			rs.stopped = append(rs.stopped, func() { r.Stop(5 * time.Second) })
			name := "llm-router"
			if len(cfgs) > 1 {
				name = fmt.Sprintf("llm-router %d", i)
			}
			rs.PIDs[name] = r.Pid()
			rs.Admins = append(rs.Admins, cfgs[i].AdminListen)
		}
		if yaml, err = envoy.Render(cfgs[0]); err != nil {
			return rs, err
		}
	}
	ev, err := stack.StartEnvoy(ctx, e.envoyBin, e.dir, yaml, base.Envoy.Admin, base.Envoy.Listen)
	if err != nil {
		return rs, err
	}
	rs.stopped = append(rs.stopped, func() { ev.Stop(3 * time.Second) })
	rs.PIDs["envoy"] = ev.Pid()
	rs.URL = "http://" + base.Envoy.Listen
	return rs, nil
}

// ParseSetups reads a comma-separated list: ROUND_ROBIN and LEAST_REQUEST
// (any upper-case word) are Envoy alone with that policy, anything else a
// router strategy followed by space-separated options: "xN" for N
// replicas, "caps=none|batch-limit|slo-sized|xF" for the workers'
// max_concurrency (none, the default: no cap; batch-limit: the engine's
// batch limit; slo-sized: the offline SLO-sized caps; xF: those times F),
// and config keys as path=value (scored x3,
// scored scoring.weights.prefix=100, latency_based caps=batch-limit,
// scored caps=x4).
func ParseSetups(s string) ([]Setup, error) {
	var out []Setup
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == strings.ToUpper(part) && !strings.Contains(part, " ") {
			out = append(out, EnvoySetup(part))
			continue
		}
		fields := strings.Fields(part)
		name := fields[0]
		if !slices.Contains(config.Strategies(), name) {
			return nil, fmt.Errorf("setup %q: want an Envoy policy (ROUND_ROBIN, LEAST_REQUEST) or a strategy (%s)", part, strings.Join(config.Strategies(), ", "))
		}
		if slices.Contains(emulate.SimulatorOnly(), name) {
			return nil, fmt.Errorf("setup %q: %s runs only in llm-bench sim, which feeds it what it reads", part, name)
		}
		replicas := 1
		var settings []string
		caps, scale := "", 0.0
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "caps="); ok {
				var err error
				if caps, scale, err = parseCaps(v); err != nil {
					return nil, fmt.Errorf("setup %q: %w", part, err)
				}
				continue
			}
			if path, _, ok := strings.Cut(f, "="); ok {
				if err := config.Set(new(config.Config), path, strings.SplitN(f, "=", 2)[1]); err != nil {
					return nil, fmt.Errorf("setup %q: %w", part, err)
				}
				settings = append(settings, f)
				continue
			}
			k, err := strconv.Atoi(strings.TrimPrefix(f, "x"))
			if !strings.HasPrefix(f, "x") || err != nil || k < 1 || k > 16 {
				return nil, fmt.Errorf("setup %q: %q is neither xN (N in 1..16) nor path=value", part, f)
			}
			replicas = k
		}
		v := VariantSetup(name, replicas, settings...)
		if scale > 0 {
			v.Caps, v.CapScale = CapsSLOSized, scale
			v.Name += fmt.Sprintf(" caps=x%g", scale)
		} else {
			v = v.WithCaps(caps)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no setup given")
	}
	return out, nil
}

// parseCaps reads a caps= value: a CapModes name, or xF (the SLO-sized
// caps times F > 0), returned as its scale.
func parseCaps(v string) (caps string, scale float64, err error) {
	if slices.Contains(CapModes(), v) {
		return v, 0, nil
	}
	if f, ok := strings.CutPrefix(v, "x"); ok {
		if x, err := strconv.ParseFloat(f, 64); err == nil && x > 0 && !math.IsInf(x, 0) {
			return CapsSLOSized, x, nil
		}
	}
	return "", 0, fmt.Errorf("caps=%s: want caps=%s or caps=xF (the SLO-sized caps times a factor F > 0)", v, strings.Join(CapModes(), "|"))
}

// VariantSetup is Envoy with n llm-router replicas using strategy with
// config settings ("path=value"); named "router <strategy> <settings> xN".
func VariantSetup(strategy string, n int, settings ...string) Setup {
	s := RouterReplicasSetup(strategy, n)
	if len(settings) == 0 {
		return s
	}
	s.Settings = settings
	s.Name = "router " + strings.Join(append([]string{strategy}, settings...), " ")
	if n > 1 {
		s.Name += fmt.Sprintf(" x%d", n)
	}
	return s
}

// WriteRouterConfig writes cfg as the YAML `llm-router serve` reads.
func WriteRouterConfig(path string, cfg config.Config) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
