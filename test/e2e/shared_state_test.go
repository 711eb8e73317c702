package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// routerFleet is several router replicas sharing one store: a real
// redis-server, or one in-memory store in this process.
type routerFleet struct {
	t       *testing.T
	stop    func()
	routers []*app.Router
	cfgs    []config.Config
	conns   []*epConn
	sampler interface {
		Snapshot(context.Context) (state.Snapshot, error)
	}
}

var prefixSeq atomic.Int64

func startRedis(t *testing.T) *stack.Redis {
	t.Helper()
	r, err := stack.StartRedis(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(2 * time.Second) })
	return r
}

func fakeWorkers(n, cap int, model string) []config.Worker {
	out := make([]config.Worker, n)
	for i := range out {
		// Nothing listens there: no scraping (metrics_format none).
		out[i] = config.Worker{ID: fmt.Sprintf("w%d", i), Address: fmt.Sprintf("127.0.0.1:%d", 1+i), Models: []string{model}, MaxConcurrency: cap, MetricsFormat: "none"}
	}
	return out
}

// newRouterFleet starts n routers; redisAddr "" means one shared in-memory
// store (the replicas are then goroutines of this process).
func newRouterFleet(t *testing.T, n int, workers []config.Worker, redisAddr string, mutate func(*config.Config)) *routerFleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &routerFleet{t: t}
	prefix := fmt.Sprintf("e2e%d", prefixSeq.Add(1))
	var shared *memory.Store
	if redisAddr == "" {
		shared = memory.New(nil, state.Limits{})
		f.sampler = shared
	} else {
		c := redis.NewClient(&redis.Options{Addr: redisAddr})
		t.Cleanup(func() { _ = c.Close() })
		f.sampler = redisstore.New(c, prefix, state.Limits{})
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		addrs := stack.MustFreeAddrs(2)
		cfg := config.Default()
		cfg.ShutdownDelay = 0
		cfg.Strategy = scoring.Scored // written against scored, like the harness
		cfg.ExtProcListen, cfg.AdminListen = addrs[0], addrs[1]
		cfg.ReplicaID = fmt.Sprintf("replica-%d", i)
		cfg.Workers = workers
		cfg.ShutdownGrace = config.Duration(time.Second)
		for _, w := range workers {
			if w.MetricsFormat == "none" {
				// Fake workers (nothing listens) would fail every health
				// check; these tests are about the store, not health.
				cfg.Health.CheckInterval = config.Duration(time.Hour)
			}
		}
		if redisAddr != "" {
			cfg.Redis.URL = "redis://" + redisAddr + "/0"
			cfg.Redis.KeyPrefix = prefix
		}
		if mutate != nil {
			mutate(&cfg)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		var opts []app.Option
		if shared != nil {
			opts = append(opts, app.WithStore(shared))
		}
		r, err := app.New(ctx, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), opts...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Serve(ctx) }()
		<-r.Ready()
		f.routers = append(f.routers, r)
		f.cfgs = append(f.cfgs, cfg)
		f.conns = append(f.conns, dialExtProc(t, cfg.ExtProcListen))
	}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(f.stop)
	return f
}

func (f *routerFleet) inFlight() map[string]int {
	f.t.Helper()
	snap, err := f.sampler.Snapshot(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = w.InFlight
	}
	return out
}

func (f *routerFleet) waitZero(timeout time.Duration) {
	f.t.Helper()
	err := stack.WaitFor(context.Background(), timeout, func() error {
		for id, n := range f.inFlight() {
			if n != 0 {
				return fmt.Errorf("%s has %d in flight", id, n)
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// herdTrials sends 4 requests at once, one ext_proc stream each, spread
// over the replicas and released together by a barrier after their headers,
// onto 4 idle workers; it returns how many trials put two on one worker.
func herdTrials(t *testing.T, f *routerFleet, trials int) (collisions int) {
	t.Helper()
	ctx := context.Background()
	const n = 4
	for trial := 0; trial < trials; trial++ {
		reqs := make([]*epRequest, n)
		for i := range reqs {
			r, err := f.conns[i%len(f.conns)].start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reqs[i] = r
		}
		var wg sync.WaitGroup
		barrier := make(chan struct{})
		got := make([]string, n)
		for i, r := range reqs {
			wg.Add(1)
			go func(i int, r *epRequest) {
				defer wg.Done()
				<-barrier
				w, status, err := r.decide(chatBody("m"))
				if err != nil || status != 200 {
					t.Errorf("decide: %v status %d", err, status)
				}
				got[i] = w
			}(i, r)
		}
		close(barrier)
		wg.Wait()
		seen := map[string]bool{}
		for _, w := range got {
			if seen[w] {
				collisions++
				break
			}
			seen[w] = true
		}
		for _, r := range reqs {
			if err := r.respond(200); err != nil {
				t.Fatal(err)
			}
		}
		f.waitZero(5 * time.Second)
	}
	return collisions
}

// TestHerdOnePerWorker: 4 idle workers, 4 requests released together
// across three replicas, 200 of 200 trials one per worker; against a real
// Redis and against one in-memory store shared by three in-process
// replicas. The same run with the atomic claim switched off shows the herd.
func TestHerdOnePerWorker(t *testing.T) {
	rd := startRedis(t)
	for _, tc := range []struct {
		name  string
		redis string
	}{{"redis", rd.Addr}, {"memory", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRouterFleet(t, 3, fakeWorkers(4, 4, "m"), tc.redis, nil)
			if c := herdTrials(t, f, 200); c != 0 {
				t.Fatalf("%d of 200 trials put two requests on one worker while another idled", c)
			}
		})
	}
	t.Run("atomic claim off shows the herd", func(t *testing.T) {
		f := newRouterFleet(t, 3, fakeWorkers(4, 4, "m"), rd.Addr, func(c *config.Config) {
			c.AtomicClaim = false
			c.RefreshInterval = config.Duration(time.Hour) // decisions on a stale snapshot
		})
		c := herdTrials(t, f, 50)
		t.Logf("without the atomic claim: %d of 50 trials collided", c)
		if c == 0 {
			t.Fatal("the herd test cannot see the herd: no collision without the atomic claim")
		}
	})
}

// TestCapsHoldAcrossReplicas: 8 workers with max_concurrency 2, 64
// concurrent requests over three replicas; sampled throughout, no worker
// ever exceeds its cap, and every count returns to 0.
func TestCapsHoldAcrossReplicas(t *testing.T) {
	rd := startRedis(t)
	for _, tc := range []struct {
		name  string
		redis string
	}{{"redis", rd.Addr}, {"memory", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRouterFleet(t, 3, fakeWorkers(8, 2, "m"), tc.redis, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var maxSeen atomic.Int64
			samplerErr := make(chan error, 1)
			go func() {
				for ctx.Err() == nil {
					for id, n := range f.inFlight() {
						if int64(n) > maxSeen.Load() {
							maxSeen.Store(int64(n))
						}
						if n > 2 {
							samplerErr <- fmt.Errorf("%s at %d in flight, cap 2", id, n)
							return
						}
					}
					time.Sleep(time.Millisecond) // the sampling period
				}
				samplerErr <- nil
			}()
			var wg sync.WaitGroup
			var served, refused atomic.Int64
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < 10; i++ {
						r, err := f.conns[g%3].start(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						_, status, err := r.decide(chatBody("m"))
						if err != nil {
							t.Error(err)
							return
						}
						if status == 200 {
							served.Add(1)
							time.Sleep(time.Duration(1+g%4) * time.Millisecond) // the request holds its slot a while
						} else {
							refused.Add(1)
						}
						_ = r.respond(200)
					}
				}(g)
			}
			wg.Wait()
			cancel()
			if err := <-samplerErr; err != nil {
				t.Fatal(err)
			}
			t.Logf("served %d, refused %d (429), max in flight seen on one worker %d", served.Load(), refused.Load(), maxSeen.Load())
			if served.Load() == 0 || maxSeen.Load() < 2 {
				t.Fatalf("the load never filled a worker: the test tests nothing")
			}
			f.waitZero(5 * time.Second)
		})
	}
}

// TestAveragesSurviveRestarts: moving averages written by one replica are
// what a restarted or second replica shows in /stats.
func TestAveragesSurviveRestarts(t *testing.T) {
	rd := startRedis(t)
	workers := fakeWorkers(2, 4, "m")
	prefix := fmt.Sprintf("restart%d", prefixSeq.Add(1))
	withPrefix := func(c *config.Config) { c.Redis.KeyPrefix = prefix }

	first := newRouterFleet(t, 1, workers, rd.Addr, withPrefix)
	for i := 0; i < 6; i++ {
		r, err := first.conns[0].start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, status, err := r.decide(chatBody("m")); err != nil || status != 200 {
			t.Fatalf("decide: %v %d", err, status)
		}
		if err := r.streamResponse(5, 2*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	first.waitZero(5 * time.Second)
	before := statsOf(t, first.cfgs[0].AdminListen, 6)
	if before["w0"].Latency.Samples+before["w1"].Latency.Samples != 6 {
		t.Fatalf("averages not recorded: %+v", before)
	}

	// The replica is gone; a new one starts: same numbers.
	first.stop()
	second := newRouterFleet(t, 1, workers, rd.Addr, withPrefix)
	after := statsOf(t, second.cfgs[0].AdminListen, 6)
	for id, st := range before {
		a := after[id]
		if a.Latency.Samples != st.Latency.Samples || a.Latency.Value != st.Latency.Value ||
			a.TTFT.Samples != st.TTFT.Samples || a.TokensPerSec.Value != st.TokensPerSec.Value || a.Requests != st.Requests {
			t.Fatalf("%s: restarted replica shows %+v, first showed %+v", id, a, st)
		}
	}
}

func statsOf(t *testing.T, adminAddr string, wantRequests int64) map[string]state.Stats {
	t.Helper()
	var out map[string]state.Stats
	// The snapshot refreshes every 100 ms; read until it has data.
	err := stack.WaitFor(context.Background(), 5*time.Second, func() error {
		resp, err := http.Get("http://" + adminAddr + "/stats")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			Workers []struct {
				ID    string      `json:"id"`
				Stats state.Stats `json:"moving_averages"`
			} `json:"workers"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		out = map[string]state.Stats{}
		total := int64(0)
		for _, w := range body.Workers {
			out[w.ID] = w.Stats
			total += w.Stats.Requests
		}
		if total < wantRequests {
			return fmt.Errorf("%d requests recorded, want %d", total, wantRequests)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCommandsPerRequest counts Redis commands with INFO commandstats: in
// steady state a request costs its claim and its release, two round trips,
// plus the amortised snapshot refresh.
func TestCommandsPerRequest(t *testing.T) {
	commandsPerRequest(t, nil, func(int) string { return chatBody("m") })
}

// commandsPerRequest sends 600 requests of the given bodies through one
// replica configured by mutate and fails above 2.1 round trips each (two,
// plus the refresh work that grows with load, amortised).
// The router's time-driven work (snapshot refresh, lease renewals,
// telemetry) also talks to Redis while the requests run, more of it the
// slower a loaded machine makes the run; it is measured in an idle window
// as long as the run, right after it, and subtracted, so the figure is
// the requests' own round trips on a quiet or a busy machine alike. The
// decision log is written by a timer only while records are pending (one
// pipeline every 250 ms), so the idle window has none of it: it is
// bounded on its own (batched, far fewer flushes than requests), not
// counted per request.
func commandsPerRequest(t *testing.T, mutate func(*config.Config), body func(i int) string) {
	t.Helper()
	rd := startRedis(t)
	f := newRouterFleet(t, 1, fakeWorkers(8, 64, "m"), rd.Addr, mutate)
	client := redis.NewClient(&redis.Options{Addr: rd.Addr})
	defer client.Close()
	ctx := context.Background()
	// Warm up (scripts loaded, connections open), then measure.
	for i := 0; i < 20; i++ {
		r, _ := f.conns[0].start(ctx)
		_, _, _ = r.decide(chatBody("m"))
		_ = r.respond(200)
	}
	before, flushedBefore := totalCalls(t, client), roundTripsOf(t, f, "decisions")
	began := time.Now()
	const n = 600
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := f.conns[0].start(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if _, status, err := r.decide(body(i)); err != nil || status != 200 {
				t.Errorf("decide: %v %d", err, status)
			}
			_ = r.respond(200)
		}()
	}
	wg.Wait()
	after := totalCalls(t, client)
	took := time.Since(began)
	// Decision records go in pipelines off the request path, one round
	// trip per flush (the XADDs inside are not counted as round trips).
	flushes := roundTripsOf(t, f, "decisions") - flushedBefore
	roundTrips := after.roundTrips - before.roundTrips - 1 // -1: the INFO call itself
	// The idle window: as long as the run, nothing sent (the sleep is the
	// window measured, not a wait for something to happen).
	time.Sleep(took)
	idle := totalCalls(t, client).roundTrips - after.roundTrips - 1
	perRequest := float64(roundTrips-idle) / n
	t.Logf("%d round trips to Redis for %d requests in %v, %d in the idle window after: %.3f per request; %d decision-log flushes (by command: %v)",
		roundTrips, n, took.Round(time.Millisecond), idle, perRequest, flushes, after.byCommand)
	if flushes > n/10 {
		t.Errorf("%d decision-log flushes for %d requests, want them batched (at most one per 10 requests)", flushes, n)
	}
	if perRequest > 2.1 {
		t.Fatalf("%.3f Redis round trips per request; want at most 2 (claim, release) plus the amortised refresh", perRequest)
	}
}

func roundTripsOf(t *testing.T, f *routerFleet, op string) int64 {
	t.Helper()
	mfs, err := f.routers[0].Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "llm_router_store_round_trips_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// scriptInner are the commands the router's Lua scripts call, and the
// XADDs of the decision stream's pipelines; INFO commandstats counts those
// calls too, but they are not round trips.
var scriptInner = map[string]bool{
	"xadd": true,
	"time": true, "zrangebyscore": true, "hget": true, "hincrby": true, "hset": true, "hdel": true,
	"zrem": true, "zadd": true, "hmget": true, "hexists": true, "hsetnx": true, "sadd": true,
	"srem": true, "exists": true, "hgetall": true, "zscore": true, "incr": true, "decr": true,
	"get": true, "set": true, "zcard": true, "zrange": true, "zrevrangebyscore": true, "zrank": true,
	"zcount": true, "smembers": true, "publish": true,
	"incrby": true, "zremrangebyrank": true, "hlen": true, "del": true,
}

type callCounts struct {
	roundTrips int64
	byCommand  map[string]int64
}

func totalCalls(t *testing.T, c *redis.Client) callCounts {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := callCounts{byCommand: map[string]int64{}}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		var calls int64
		fmt.Sscanf(rest, "%d", &calls)
		out.byCommand[name] = calls
		if !scriptInner[name] {
			out.roundTrips += calls
		}
	}
	return out
}
