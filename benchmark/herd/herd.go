package herd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// Options configure Run.
type Options struct {
	BinDir     string
	Workers    int      // idle GPUs, and requests per burst
	Bursts     int      // per configuration
	Strategies []string // router strategies
	Replicas   []int    // router replica counts, all sharing one redis-server
	// Baselines are Envoy policies measured for reference (no router).
	Baselines []string
	// Hold is how long each request keeps its GPU (simulated TTFT), long
	// enough for a whole burst to be routed while all are held.
	Hold       time.Duration
	ResultsDir string
	Command    string
	Progress   io.Writer
	Log        io.Writer
}

// Result is one configuration's collisions.
type Result struct {
	Setup       string `json:"setup"`
	Strategy    string `json:"strategy,omitempty"`
	Replicas    int    `json:"replicas"`
	AtomicClaim *bool  `json:"atomic_claim,omitempty"`
	Bursts      int    `json:"bursts"`
	// Collisions counts bursts in which a GPU was given two requests while
	// another had none.
	Collisions    int     `json:"collisions"`
	CollisionRate float64 `json:"collision_rate"`
	// MeanIdle is the mean number of GPUs left without a request per burst.
	MeanIdle float64 `json:"mean_idle_gpus"`
	Errors   int     `json:"errors"`
}

// Report is the herd benchmark's outcome.
type Report struct {
	Command  string    `json:"command"`
	Machine  string    `json:"machine"`
	Started  time.Time `json:"started"`
	Workers  int       `json:"workers"`
	Hold     string    `json:"hold"`
	Results  []Result  `json:"results"`
	Topology string    `json:"topology"`
}

// topology explains the replicas' arrangement in reports.
const topology = "Every router replica sits behind one Envoy that lists all of them in envoy.extproc_addrs, as deployed: Envoy spreads each burst's ext_proc streams over the replicas, so the replicas race each other on one shared redis-server, which is the race the atomic claim exists for. One Envoy per replica would only add a client-side choice of Envoy in front of the same race."

// Run sends bursts of Workers simultaneous requests onto Workers idle
// GPUs and counts collisions: bursts where some GPU got two requests while
// another got none. Each configuration (strategy × atomic claim on/off ×
// replica count, plus the Envoy baselines) starts fresh; every request
// holds its GPU for Hold so that the whole burst is routed while all are
// held; between bursts the fleet and every replica's claims return to idle
// and the replicas' cached snapshots refresh.
func Run(ctx context.Context, o Options) (*Report, error) {
	rep := &Report{Command: o.Command, Machine: host.Machine(), Started: time.Now(), Workers: o.Workers, Hold: o.Hold.String(), Topology: topology}
	dir, err := os.MkdirTemp("", "llmr-herd-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := fleet.NewEnv(o.BinDir, dir)
	if err != nil {
		return nil, err
	}
	gpus := make([]fleet.GPU, o.Workers)
	for i := range gpus {
		gpus[i] = fleet.GPU{ID: fmt.Sprintf("gpu-%d", i), Cap: o.Workers}
	}
	sim, err := fleet.Start(ctx, o.BinDir, dir, gpus, 1, map[string]any{"ttft_ms": float64(o.Hold.Milliseconds()), "tokens_per_second": 0})
	if err != nil {
		return nil, err
	}
	defer sim.Stop(3 * time.Second)
	redis, err := stack.StartRedis(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	defer redis.Stop(2 * time.Second)
	// The race is for the cap's last slot: every worker keeps its cap.
	workers := fleet.Workers(gpus, fleet.Setup{})
	for i := range workers {
		workers[i].MaxConcurrency = gpus[i].Cap
	}

	type herdCase struct {
		setup    fleet.Setup
		replicas int
		atomic   *bool
	}
	var cases []herdCase
	for _, p := range o.Baselines {
		cases = append(cases, herdCase{setup: fleet.EnvoySetup(p), replicas: 0})
	}
	for _, s := range o.Strategies {
		for _, n := range o.Replicas {
			for _, atomic := range []bool{true, false} {
				cases = append(cases, herdCase{setup: fleet.RouterSetup(s), replicas: n, atomic: &atomic})
			}
		}
	}
	for i, c := range cases {
		opts := fleet.RouterOptions{Replicas: c.replicas, RedisAddr: redis.Addr}
		if c.atomic != nil {
			atomic := *c.atomic
			prefix := fmt.Sprintf("herd%d", i)
			opts.Mutate = func(cfg *config.Config) {
				cfg.AtomicClaim = atomic
				cfg.Redis.KeyPrefix = prefix
				cfg.LogLevel = "warn"
			}
		}
		res, err := runCase(ctx, e, c.setup, workers, gpus, opts, o)
		if err != nil {
			return rep, err
		}
		res.Replicas, res.AtomicClaim = c.replicas, c.atomic
		rep.Results = append(rep.Results, res)
		logf(o.Log, "%-28s replicas %d atomic %-5s  collisions %3d/%d (%.0f%%), idle GPUs per burst %.2f, errors %d",
			c.setup.Name, c.replicas, atomicWord(c.atomic), res.Collisions, res.Bursts, 100*res.CollisionRate, res.MeanIdle, res.Errors)
	}
	if o.ResultsDir != "" {
		if err := writeReport(o.ResultsDir, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// runCase runs one configuration's bursts.
func runCase(ctx context.Context, e fleet.Env, s fleet.Setup, workers []config.Worker, gpus []fleet.GPU, opts fleet.RouterOptions, o Options) (Result, error) {
	res := Result{Setup: s.Name, Strategy: s.Strategy, Bursts: o.Bursts}
	rs, err := e.Start(ctx, s, workers, opts)
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.Name, err)
	}
	defer rs.Stop()
	c := loadgen.NewClient(rs.URL, 4*o.Workers, "")
	defer c.Close()
	req := loadgen.Request{Model: loadgen.Model, MaxTokens: 1, PromptTokens: 8}
	// Warm-up: connections to Envoy, Envoy's to the GPUs and the replicas,
	// and one request per replica so that none answers its first
	// request slowly; not counted.
	for i := 0; i < 2; i++ {
		burst(ctx, c, req, o.Workers)
		if err := waitIdle(ctx, gpus, rs.Admins); err != nil {
			return res, err
		}
	}
	prog := loadgen.NewProgress(o.Progress, "herd "+s.Name, o.Bursts)
	defer prog.Finish()
	idle := 0
	for b := 0; b < o.Bursts; b++ {
		nodes, errs := burst(ctx, c, req, o.Workers)
		res.Errors += errs
		col, free := collision(nodes, fleet.IDs(gpus))
		if col {
			res.Collisions++
		}
		idle += free
		prog.Add(1)
		if err := waitIdle(ctx, gpus, rs.Admins); err != nil {
			return res, err
		}
	}
	if res.Bursts > 0 {
		res.CollisionRate = float64(res.Collisions) / float64(res.Bursts)
		res.MeanIdle = float64(idle) / float64(res.Bursts)
	}
	return res, ctx.Err()
}

// burst releases n requests at once and returns the worker that served
// each successful one.
func burst(ctx context.Context, c *loadgen.Client, req loadgen.Request, n int) (nodes []string, errs int) {
	start := make(chan struct{})
	results := make([]loadgen.Result, n)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(n)
	epoch := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			results[i] = c.Do(ctx, req, epoch)
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()
	for _, r := range results {
		if !r.OK() || r.Node == "" {
			errs++
			continue
		}
		nodes = append(nodes, r.Node)
	}
	return nodes, errs
}

// collision reports whether the served requests doubled up on a worker
// while another of workers got none, and how many got none.
func collision(nodes, workers []string) (bool, int) {
	count := map[string]int{}
	for _, n := range nodes {
		count[n]++
	}
	idle, doubled := 0, false
	for _, w := range workers {
		switch {
		case count[w] == 0:
			idle++
		case count[w] > 1:
			doubled = true
		}
	}
	return doubled && idle > 0, idle
}

// waitIdle waits until the GPUs are idle and every replica counts no
// claim, then for two refresh periods, so each replica's cached snapshot
// shows the idle fleet: the herd benchmark's "idle fleet".
func waitIdle(ctx context.Context, gpus []fleet.GPU, admins []string) error {
	if err := fleet.WaitIdle(ctx, gpus, time.Minute); err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second}
	for _, a := range admins {
		err := stack.WaitFor(ctx, 30*time.Second, func() error {
			n, err := routerInFlight(ctx, hc, a)
			if err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%d claims still held", n)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("router %s: %w", a, err)
		}
	}
	if len(admins) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Duration(config.Default().RefreshInterval)):
		}
	}
	return nil
}

// routerInFlight sums the in-flight counts of a replica's GET /health.
func routerInFlight(ctx context.Context, hc *http.Client, admin string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Workers []struct {
			InFlight int `json:"in_flight"`
		} `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("decode /health: %w", err)
	}
	n := 0
	for _, w := range h.Workers {
		n += w.InFlight
	}
	return n, nil
}

func atomicWord(a *bool) string {
	if a == nil {
		return "-"
	}
	return strconv.FormatBool(*a)
}

// writeReport writes herd.json, herd.csv and herd.md into a run folder and
// publishes them to latest/.
func writeReport(results string, rep *Report) error {
	dir, err := record.Folder(results, "herd", rep.Started)
	if err != nil {
		return err
	}
	if err := record.WriteJSON(filepath.Join(dir, "herd.json"), rep); err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, "herd.csv"), func(w io.Writer) error { return writeCSV(w, rep) }); err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, "herd.md"), func(w io.Writer) error { rep.Markdown(w); return nil }); err != nil {
		return err
	}
	return record.Publish(results, dir, []string{"herd.json", "herd.csv", "herd.md"})
}

func writeCSV(w io.Writer, rep *Report) error {
	fmt.Fprintln(w, "setup,replicas,atomic_claim,bursts,collisions,collision_rate,mean_idle_gpus,errors")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%s,%d,%s,%d,%d,%.4f,%.4f,%d\n", r.Setup, r.Replicas, atomicWord(r.AtomicClaim), r.Bursts, r.Collisions, r.CollisionRate, r.MeanIdle, r.Errors)
	}
	return nil
}

// Markdown writes the herd table.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# llm-router benchmark: the herd race\n\n")
	fmt.Fprintf(w, "- **Command**: `%s`\n- **Machine**: %s\n- **Started**: %s\n", r.Command, r.Machine, r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- **Bursts**: %d simultaneous requests onto %d idle simulated GPUs, each request holding its GPU for %s\n", r.Workers, r.Workers, r.Hold)
	fmt.Fprintf(w, "- **Collision**: a burst in which a GPU was given two requests while another had none\n- **Topology**: %s\n\n", r.Topology)
	fmt.Fprintln(w, "| setup | replicas | atomic claim | bursts | collisions | collision rate | idle GPUs per burst | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, h := range r.Results {
		reps := strconv.Itoa(h.Replicas)
		if h.Replicas == 0 {
			reps = "-"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.0f%% | %.2f | %d |\n", h.Setup, reps, atomicWord(h.AtomicClaim), h.Bursts, h.Collisions, 100*h.CollisionRate, h.MeanIdle, h.Errors)
	}
}

func logf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}
