// Package chaos runs the production failure scenarios against a real local
// stack: Envoy, Redis, three router replicas and gpusim workers, under a
// steady load, and reports for each scenario the requests sent, failed and
// lost, and the recovery time. `make chaos` runs them all; the e2e tests run
// a short subset.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// Stack is the system under test.
type Stack struct {
	dir      string
	bins     map[string]string
	Redis    *stack.Redis // one of Redis, Sentinel, Cluster
	Sentinel *stack.SentinelGroup
	Cluster  *stack.Cluster
	Envoy    *stack.Envoy
	URL      string
	Routers  []*stack.Router
	cfgs     []config.Config
	paths    []string
	Workers  map[string]*stack.Gpusim
	workerBy map[string][]string // model → worker ids
	args     map[string][]string // worker id → gpusim args (for restarts)
	prefix   string
}

// Options configure the stack.
type Options struct {
	BinDir   string // llm-router and gpusim
	Replicas int
	// Discovery is envoy.discovery: "static" (default) or "xds" (worker
	// clusters over ADS from the replicas, as the Kubernetes manifests run).
	Discovery string
	// Redis is the topology: RedisSingle (default), RedisSentinel or
	// RedisCluster.
	Redis string
}

// Start brings the stack up: Redis, workers (a-0, a-1, a-2 serve model-a;
// b-0 serves model-b), the router replicas and Envoy in front.
func Start(ctx context.Context, o Options) (*Stack, error) {
	dir, err := os.MkdirTemp("", "llmr-chaos-")
	if err != nil {
		return nil, err
	}
	s := &Stack{dir: dir, bins: map[string]string{
		"llm-router": filepath.Join(o.BinDir, "llm-router"), "gpusim": filepath.Join(o.BinDir, "gpusim"),
	}, Workers: map[string]*stack.Gpusim{}, workerBy: map[string][]string{}, args: map[string][]string{}, prefix: "chaos"}
	if err = s.startRedis(ctx, o.Redis); err != nil {
		s.Stop()
		return nil, err
	}
	var workers []config.Worker
	for _, w := range []struct{ id, model string }{{"a-0", "model-a"}, {"a-1", "model-a"}, {"a-2", "model-a"}, {"b-0", "model-b"}} {
		args := []string{"--id", w.id, "--model", w.model, "--tokens-per-second", "300", "--ttft-ms", "5"}
		g, err := stack.StartGpusim(ctx, s.bins["gpusim"], args...)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Workers[w.id], s.args[w.id] = g, append([]string{"--listen", g.Addr}, args...)
		s.workerBy[w.model] = append(s.workerBy[w.model], w.id)
		workers = append(workers, config.Worker{ID: w.id, Address: g.Addr, Models: []string{w.model}, MaxConcurrency: 16})
	}
	n := max(o.Replicas, 1)
	addrs := stack.MustFreeAddrs(2*n + 2)
	var extproc []string
	for i := 0; i < n; i++ {
		extproc = append(extproc, addrs[2*i])
	}
	for i := 0; i < n; i++ {
		cfg := config.Default()
		cfg.ReplicaID = fmt.Sprintf("replica-%d", i)
		cfg.ExtProcListen, cfg.AdminListen = addrs[2*i], addrs[2*i+1]
		cfg.Envoy.Listen, cfg.Envoy.Admin = addrs[2*n], addrs[2*n+1]
		cfg.Envoy.ExtProcAddrs = extproc
		if o.Discovery != "" {
			cfg.Envoy.Discovery = o.Discovery
		}
		s.redisConfig(&cfg.Redis)
		cfg.Redis.KeyPrefix = s.prefix
		cfg.Redis.Timeout = config.Duration(200 * time.Millisecond)
		cfg.ClaimLease = config.Duration(3 * time.Second)
		cfg.LogLevel = "warn"
		cfg.Workers = workers
		cfg.Health.CheckInterval = config.Duration(time.Second)
		cfg.Health.HoldDown = config.Duration(2 * time.Second)
		path := filepath.Join(dir, cfg.ReplicaID+".yaml")
		b, err := yaml.Marshal(cfg)
		if err != nil {
			s.Stop()
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			s.Stop()
			return nil, err
		}
		s.cfgs, s.paths = append(s.cfgs, cfg), append(s.paths, path)
		s.Routers = append(s.Routers, nil)
		if err := s.StartRouter(ctx, i); err != nil {
			s.Stop()
			return nil, err
		}
	}
	envoyBin, err := stack.EnvoyBinary()
	if err != nil {
		s.Stop()
		return nil, err
	}
	y, err := envoy.Render(s.cfgs[0])
	if err != nil {
		s.Stop()
		return nil, err
	}
	if s.Envoy, err = stack.StartEnvoy(ctx, envoyBin, dir, y, s.cfgs[0].Envoy.Admin, s.cfgs[0].Envoy.Listen); err != nil {
		s.Stop()
		return nil, err
	}
	s.URL = "http://" + s.cfgs[0].Envoy.Listen
	return s, s.WaitExtProcHealthy(ctx, 10*time.Second)
}

// StartRouter (re)starts replica i.
func (s *Stack) StartRouter(ctx context.Context, i int) error {
	r, err := stack.StartRouter(ctx, s.bins["llm-router"], s.paths[i], s.cfgs[i].AdminListen, s.cfgs[i].ExtProcListen)
	if err != nil {
		return err
	}
	s.Routers[i] = r
	return nil
}

// KillRouter kills replica i with SIGKILL.
func (s *Stack) KillRouter(i int) { s.Routers[i].Kill() }

// RestartWorker starts a killed worker again on its address.
func (s *Stack) RestartWorker(ctx context.Context, id string) error {
	g, err := stack.StartGpusim(ctx, s.bins["gpusim"], s.args[id]...)
	if err != nil {
		return err
	}
	s.Workers[id] = g
	return nil
}

// Stop stops everything.
func (s *Stack) Stop() {
	if s.Envoy != nil {
		s.Envoy.Stop(3 * time.Second)
	}
	for _, r := range s.Routers {
		if r != nil {
			r.Stop(3 * time.Second)
		}
	}
	for _, g := range s.Workers {
		g.Stop(2 * time.Second)
	}
	s.stopRedis()
	_ = os.RemoveAll(s.dir)
}

// extprocHosts reads Envoy's view of the router replicas: address →
// healthy.
func (s *Stack) extprocHosts() (map[string]bool, error) {
	resp, err := http.Get("http://" + s.Envoy.AdminAddr + "/clusters?format=json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc struct {
		ClusterStatuses []struct {
			Name         string `json:"name"`
			HostStatuses []struct {
				Address struct {
					SocketAddress struct {
						Address   string `json:"address"`
						PortValue int    `json:"port_value"`
					} `json:"socket_address"`
				} `json:"address"`
				HealthStatus map[string]any `json:"health_status"`
			} `json:"host_statuses"`
		} `json:"cluster_statuses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range doc.ClusterStatuses {
		if c.Name != "llm_router_extproc" {
			continue
		}
		for _, h := range c.HostStatuses {
			addr := fmt.Sprintf("%s:%d", h.Address.SocketAddress.Address, h.Address.SocketAddress.PortValue)
			healthy := h.HealthStatus["eds_health_status"] == "HEALTHY"
			for k, v := range h.HealthStatus {
				if k != "eds_health_status" && v == true {
					healthy = false // failed_active_health_check, failed_outlier_check, ...
				}
			}
			out[addr] = healthy
		}
	}
	return out, nil
}

// WaitExtProcHealthy waits until Envoy sees every running replica healthy.
func (s *Stack) WaitExtProcHealthy(ctx context.Context, timeout time.Duration) error {
	return stack.WaitFor(ctx, timeout, func() error {
		hosts, err := s.extprocHosts()
		if err != nil {
			return err
		}
		for i, r := range s.Routers {
			if r != nil && !r.Exited() && !hosts[s.cfgs[i].ExtProcListen] {
				return fmt.Errorf("replica %d not healthy in Envoy yet", i)
			}
		}
		return nil
	})
}

// Snapshot reads the shared state from Redis, as the replicas see it. Each
// call has its own connection: Redis may have been restarted since the last.
func (s *Stack) Snapshot(ctx context.Context) (state.Snapshot, error) {
	c := s.redisClient()
	defer c.Close()
	st, err := redisstore.NewPooled(c, s.prefix, state.Limits{Lease: s.cfgs[0].ClaimLease.D()}, s.cfgs[0].Redis.Pools)
	if err != nil {
		return state.Snapshot{}, err
	}
	return st.Snapshot(ctx)
}

// WorkerHealth is worker id's health in the shared state ("" when unknown).
func (s *Stack) WorkerHealth(ctx context.Context, id string) scoring.Health {
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return ""
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == id {
			return w.Health
		}
	}
	return ""
}

// Counts reads every worker's in-flight count and the queues from Redis.
func (s *Stack) Counts(ctx context.Context) (inflight int, queued int, err error) {
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, w := range snap.Workers {
		inflight += w.InFlight
	}
	for _, q := range snap.Queues {
		queued += q.Critical + q.Standard + q.Batch
	}
	return inflight, queued, nil
}

// Health reads a replica's /health status.
func (s *Stack) Health(i int) string {
	resp, err := http.Get("http://" + s.cfgs[i].AdminListen + "/health")
	if err != nil {
		return "down"
	}
	defer resp.Body.Close()
	var h struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&h)
	return h.Status
}
