package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/test/stack"
)

// adminConfig changes a gpusim worker's behaviour at run time.
func (e *env) adminConfig(worker, body string) {
	e.t.Helper()
	resp, err := http.Post("http://"+e.Workers[worker].Addr+"/admin/config", "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("gpusim /admin/config: %d", resp.StatusCode)
	}
}

// served counts inference requests a gpusim worker answered, 503s included.
func (e *env) served(worker string) int64 {
	e.t.Helper()
	resp, err := http.Get("http://" + e.Workers[worker].Addr + "/admin/state")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		e.t.Fatal(err)
	}
	v, _ := st["served_total"].(float64)
	return int64(v)
}

// shareOf sends n streamed requests, conc at a time, and returns the share
// each worker served (x-routed-node).
func (e *env) shareOf(n, conc int, body string) map[string]float64 {
	e.t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				e.t.Error(err)
				return
			}
			copyLimited(new(strings.Builder), resp)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				e.t.Errorf("status %d", resp.StatusCode)
				return
			}
			mu.Lock()
			counts[resp.Header.Get("x-routed-node")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	out := map[string]float64{}
	for k, v := range counts {
		out[k] = float64(v) / float64(n)
	}
	return out
}

// TestSlowWorkerGetsLessTraffic: a worker made ten times slower at run time
// receives clearly less than an even share under scored and
// inference_aware, over 240 requests.
func TestSlowWorkerGetsLessTraffic(t *testing.T) {
	for _, strategy := range []string{"scored", "inference_aware"} {
		t.Run(strategy, func(t *testing.T) {
			args := []string{"--tokens-per-second", "200", "--ttft-ms", "10"}
			e := newEnv(t, []workerSpec{{ID: "fast", Model: "m", Cap: 16, Args: args}, {ID: "slow", Model: "m", Cap: 16, Args: args}},
				func(c *config.Config) { c.Strategy = strategy })
			e.adminConfig("slow", `{"slowdown": 10}`)
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true}`
			share := e.shareOf(240, 6, body)
			t.Logf("%s: fast served %.0f%%, slow %.0f%% of 240 requests", strategy, 100*share["fast"], 100*share["slow"])
			if share["slow"] > 0.3 {
				t.Fatalf("the slow worker got %.0f%% of the traffic; an even split is 50%%", 100*share["slow"])
			}
			e.waitIdle(5 * time.Second)
		})
	}
}

// TestFailingWorkerIsTakenOutAndComesBack: a worker answering 503 is
// marked unhealthy within the failure threshold and receives nothing; once
// it recovers, it is probed and serves again. No client sees an error:
// Envoy retries the 503s on the other worker.
func TestFailingWorkerIsTakenOutAndComesBack(t *testing.T) {
	args := []string{"--tokens-per-second", "0", "--ttft-ms", "0"}
	e := newEnv(t, []workerSpec{{ID: "good", Model: "m", Args: args}, {ID: "bad", Model: "m", Args: args}}, func(c *config.Config) {
		c.Strategy = "round_robin" // sends to both, so the failures are met quickly
		c.Health.CheckInterval = config.Duration(200 * time.Millisecond)
		c.Health.HoldDown = config.Duration(time.Second)
	})
	e.adminConfig("bad", `{"error_rate": 1}`)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	health := func() scoring.Health {
		for _, w := range e.Router.Scheduler().Snapshot().Workers {
			if w.Spec.ID == "bad" {
				return w.Health
			}
		}
		return ""
	}
	sent := 0
	for ; sent < 20 && health() != scoring.Unhealthy; sent++ {
		if resp, b := e.post("/v1/chat/completions", body, nil); resp.StatusCode != 200 {
			t.Fatalf("client saw %d: %s", resp.StatusCode, b)
		}
		_ = e.Router.Scheduler().Refresh(e.ctx)
	}
	if health() != scoring.Unhealthy {
		t.Fatalf("still %s after %d requests with every one on it failing", health(), sent)
	}
	t.Logf("unhealthy after %d requests (threshold 3 failures in a row)", sent)
	before := e.served("bad")
	for i := 0; i < 20; i++ {
		if resp, b := e.post("/v1/chat/completions", body, nil); resp.StatusCode != 200 || resp.Header.Get("x-routed-node") != "good" {
			t.Fatalf("%d from %s: %s", resp.StatusCode, resp.Header.Get("x-routed-node"), b)
		}
	}
	if after := e.served("bad"); after != before {
		t.Fatalf("the unhealthy worker received %d requests", after-before)
	}

	e.adminConfig("bad", `{"error_rate": 0}`)
	err := stack.WaitFor(e.ctx, 10*time.Second, func() error {
		if resp, _ := e.post("/v1/chat/completions", body, nil); resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		_ = e.Router.Scheduler().Refresh(e.ctx)
		if h := health(); h != scoring.Healthy {
			return fmt.Errorf("bad is %s", h)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("did not come back: %v", err)
	}
	if share := e.shareOf(40, 2, body); share["bad"] < 0.3 {
		t.Fatalf("recovered worker serves %.0f%% under round robin", 100*share["bad"])
	}
}

// TestScrapeLoadDoesNotGrowWithReplicas: 16 workers scraped by 3 replicas
// sharing Redis cost one scrape per worker per interval, not three; and
// what was scraped reaches every replica's scores.
func TestScrapeLoadDoesNotGrowWithReplicas(t *testing.T) {
	rd := startRedis(t)
	const n = 16
	var fleet strings.Builder
	addrs := stack.MustFreeAddrs(n)
	var workers []config.Worker
	for i, a := range addrs {
		id := fmt.Sprintf("gpu-%d", i)
		fmt.Fprintf(&fleet, "- {id: %s, listen: %q, models: [m], tokens_per_second: 0, ttft_ms: 0}\n", id, a)
		workers = append(workers, config.Worker{ID: id, Address: a, Models: []string{"m"}, MaxConcurrency: 4})
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(fleet.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	sim, err := stack.Start("gpusim fleet", bins["gpusim"], []string{"--fleet", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Stop(2 * time.Second) })
	for _, a := range addrs {
		if err := stack.WaitTCP(context.Background(), a, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	interval := 200 * time.Millisecond
	f := newRouterFleet(t, 3, workers, rd.Addr, func(c *config.Config) {
		c.Telemetry.ScrapeInterval = config.Duration(interval)
		c.Telemetry.ScrapeTimeout = config.Duration(150 * time.Millisecond)
	})
	total := func() int64 {
		var s int64
		for _, r := range f.routers {
			for _, v := range r.Monitor().Scrapes() {
				s += v
			}
		}
		return s
	}
	// Past the start: every worker scraped twice, so each has a lease
	// holder that kept it for a cycle.
	if err := stack.WaitFor(context.Background(), 10*time.Second, func() error {
		per := map[string]int64{}
		for _, r := range f.routers {
			for id, v := range r.Monitor().Scrapes() {
				per[id] += v
			}
		}
		for _, w := range workers {
			if per[w.ID] < 2 {
				return fmt.Errorf("%s scraped %d times", w.ID, per[w.ID])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start, t0 := total(), time.Now()
	time.Sleep(3 * time.Second) // the window the scrape rate is measured over
	rate := float64(total()-start) / time.Since(t0).Seconds()
	ideal := float64(n) / interval.Seconds()
	t.Logf("3 replicas, %d workers, %v interval: %.1f scrapes/s to the workers (one replica alone: %.1f/s; without leases: %.1f/s)", n, interval, rate, ideal, 3*ideal)
	if rate > 1.3*ideal || rate < 0.7*ideal {
		t.Fatalf("%.1f scrapes/s; want about %.1f, independent of the replica count", rate, ideal)
	}
	// Every replica scores on what one of them scraped.
	for i, r := range f.routers {
		if err := r.Scheduler().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, w := range r.Scheduler().Snapshot().Workers {
			if tm := w.Telemetry; tm.KVUsage.At.IsZero() || tm.Waiting.At.IsZero() || time.Since(tm.At) > time.Second {
				t.Fatalf("replica %d: %s telemetry missing or old: %+v", i, w.Spec.ID, tm)
			}
		}
	}
}

// TestClientGetsExactlyWhatItAskedFor: the router asks workers for usage on
// streamed requests (exact token counts) and removes it from the response
// of a client that did not ask; a client that asked gets it.
func TestClientGetsExactlyWhatItAskedFor(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), nil)
	stream := func(extra string) (string, string) {
		resp, body := e.post("/v1/chat/completions",
			`{"model":"model-a","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true`+extra+`}`, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return body, resp.Header.Get("x-routed-node")
	}
	plain, node := stream("")
	if strings.Contains(plain, `"usage"`) || strings.Count(plain, "data: ") != 5+2 || !strings.HasSuffix(plain, "data: [DONE]\n\n") {
		t.Fatalf("a client that did not ask for usage received:\n%s", plain)
	}
	withUsage, _ := stream(`,"stream_options":{"include_usage":true}`)
	if !strings.Contains(withUsage, `"completion_tokens":5`) {
		t.Fatalf("a client that asked for usage did not get it:\n%s", withUsage)
	}
	// The router counted the tokens from the worker's usage either way.
	mfs, err := e.Router.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "llm_router_tokens_generated_total" {
			continue
		}
		var total float64
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
		if total != 10 {
			t.Fatalf("tokens counted %v, want 10 (last on %s)", total, node)
		}
		return
	}
	t.Fatal("no llm_router_tokens_generated_total")
}
