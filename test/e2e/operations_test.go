package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llm-router/llm-router/internal/config"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/test/stack"
)

const adminToken = "admin-secret-0001"

// cliRun runs the llm-router CLI against an admin URL.
func cliRun(t *testing.T, admin string, args ...string) string {
	t.Helper()
	args = append(args, "--admin", admin, "--token", adminToken)
	out, err := exec.Command(bins["llm-router"], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("llm-router %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// steadyLoad sends model's requests from conc clients until stopped and
// counts failures; it also counts responses per worker.
type steadyLoad struct {
	stop     context.CancelFunc
	wg       sync.WaitGroup
	sent     atomic.Int64
	mu       sync.Mutex
	failures []string
	served   map[string]int
}

func (e *env) startLoad(model string, conc int) *steadyLoad {
	ctx, cancel := context.WithCancel(e.ctx)
	l := &steadyLoad{stop: cancel, served: map[string]int{}}
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`
	for i := 0; i < conc; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if ctx.Err() != nil {
					return
				}
				l.sent.Add(1)
				if err != nil {
					l.fail(err.Error())
					continue
				}
				b := new(strings.Builder)
				copyLimited(b, resp)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					l.fail(fmt.Sprintf("%d %s", resp.StatusCode, b))
					continue
				}
				l.mu.Lock()
				l.served[resp.Header.Get("x-routed-node")]++
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond) // pacing: a steady load, not a flood
			}
		}()
	}
	return l
}

func (l *steadyLoad) fail(s string) {
	l.mu.Lock()
	l.failures = append(l.failures, s)
	l.mu.Unlock()
}

func (l *steadyLoad) servedBy(w string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[w]
}

// waitAnswered waits until n more requests were answered than at its
// call: the load is running through whatever the test just did.
func (l *steadyLoad) waitAnswered(t *testing.T, n int64) {
	t.Helper()
	from := l.sent.Load()
	if err := stack.WaitFor(context.Background(), 15*time.Second, func() error {
		if got := l.sent.Load() - from; got < n {
			return fmt.Errorf("%d of %d requests answered", got, n)
		}
		return nil
	}); err != nil {
		t.Fatalf("the load stalled: %v", err)
	}
}

func (l *steadyLoad) finish(t *testing.T) {
	t.Helper()
	l.stop()
	l.wg.Wait()
	if len(l.failures) > 0 {
		t.Fatalf("%d of %d requests failed, e.g. %v", len(l.failures), l.sent.Load(), l.failures[:min(3, len(l.failures))])
	}
	t.Logf("%d requests, none failed; served by %v", l.sent.Load(), l.served)
}

// TestRegisteredWorkerJoinsAndLeaves: a gpusim registered through the
// admin API by an agent (llm-router register --keep-alive) is served
// through Envoy within a second, appears in `workers` and on a second
// replica; when its heartbeats stop it is gone within its lease, and no
// client request fails meanwhile.
func TestRegisteredWorkerJoinsAndLeaves(t *testing.T) {
	rd := startRedis(t)
	base := startWorkers(t, []workerSpec{{ID: "a-0", Model: "model-a", Args: []string{"--tokens-per-second", "0", "--ttft-ms", "0"}}})
	base.Cfg.Envoy.Discovery = "xds"
	base.Cfg.Admin.Token = adminToken
	base.Cfg.Redis.URL = "redis://" + rd.Addr + "/0"
	base.Cfg.Redis.KeyPrefix = fmt.Sprintf("dyn%d", prefixSeq.Add(1))
	base.Cfg.Strategy = "round_robin" // the new worker gets its turn at once
	e := base.replica("replica-a")
	e.startFront()
	other := newRouterFleet(t, 1, base.Cfg.Workers, rd.Addr, func(c *config.Config) {
		c.Redis.KeyPrefix = base.Cfg.Redis.KeyPrefix
		c.Envoy.Discovery = "xds"
		c.Admin.Token = adminToken
		c.Strategy = "round_robin"
	})
	admin := "http://" + e.Cfg.AdminListen

	dyn, err := stack.StartGpusim(e.ctx, bins["gpusim"], "--id", "dyn", "--model", "model-a", "--tokens-per-second", "0", "--ttft-ms", "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dyn.Stop(time.Second) })

	load := e.startLoad("model-a", 2)
	load.waitAnswered(t, 20)
	start := time.Now()
	agent, err := stack.Start("agent", bins["llm-router"], []string{
		"register", "--id", "dyn", "--address", dyn.Addr, "--model", "model-a",
		"--lease", "2s", "--keep-alive", "--admin", admin, "--token", adminToken,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Stop(time.Second) })
	if err := stack.WaitFor(e.ctx, 3*time.Second, func() error {
		if load.servedBy("dyn") == 0 {
			return fmt.Errorf("not served yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("registered worker not served: %v\nagent: %s", err, agent.Log())
	}
	joined := time.Since(start)
	t.Logf("registered worker served through Envoy %v after the agent started", joined.Round(time.Millisecond))
	if joined > time.Second {
		t.Fatalf("served only after %v; want within 1 s", joined)
	}
	if out := cliRun(t, admin, "workers"); !strings.Contains(out, "dyn") || !strings.Contains(out, "registered") {
		t.Fatalf("workers:\n%s", out)
	}
	// The other replica routes to it too (once its own join delay passed).
	seen := map[string]bool{}
	if err := stack.WaitFor(e.ctx, 2*time.Second, func() error {
		r, err := other.conns[0].start(e.ctx)
		if err != nil {
			return err
		}
		w, _, _ := r.decide(chatBody("model-a"))
		seen[w] = true
		_ = r.respond(200)
		if !seen["dyn"] {
			return fmt.Errorf("picked %v", seen)
		}
		return nil
	}); err != nil {
		t.Fatalf("the second replica never picked the registered worker: %v", err)
	}

	agent.Kill() // heartbeats stop; the worker itself keeps serving
	stopped := time.Now()
	if err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
		if out := cliRun(t, admin, "workers", "-o", "json"); strings.Contains(out, `"dyn"`) {
			return fmt.Errorf("still listed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("gone from the fleet %v after its heartbeats stopped (lease 2s)", time.Since(stopped).Round(time.Millisecond))
	load.waitAnswered(t, 20)
	load.finish(t)
}

// TestRollingRestartWithDrain restarts each of two model-a workers in turn
// with drain --wait, restart, undrain, under steady load: no client error.
func TestRollingRestartWithDrain(t *testing.T) {
	args := []string{"--tokens-per-second", "100", "--ttft-ms", "5"}
	e := newEnv(t, []workerSpec{{ID: "a-0", Model: "model-a", Args: args}, {ID: "a-1", Model: "model-a", Args: args}},
		func(c *config.Config) { c.Admin.Token = adminToken })
	admin := "http://" + e.Cfg.AdminListen
	load := e.startLoad("model-a", 3)
	for _, id := range []string{"a-0", "a-1"} {
		load.waitAnswered(t, 30)
		out := cliRun(t, admin, "drain", id, "--wait", "--timeout", "30s")
		if !strings.Contains(out, "draining") {
			t.Fatalf("drain: %s", out)
		}
		if n := e.inFlight()[id]; n != 0 {
			t.Fatalf("drain --wait returned with %d in flight on %s", n, id)
		}
		before := load.servedBy(id)
		g := e.Workers[id]
		g.Stop(5 * time.Second)
		restarted, err := stack.StartGpusim(e.ctx, bins["gpusim"], append([]string{"--listen", g.Addr, "--id", id, "--model", "model-a"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		e.Workers[id] = restarted
		if got := load.servedBy(id); got != before {
			t.Fatalf("a drained worker served %d requests", got-before)
		}
		cliRun(t, admin, "undrain", id)
		if err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
			if load.servedBy(id) == before {
				return fmt.Errorf("%s not serving again", id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	load.waitAnswered(t, 20)
	load.finish(t)
	e.waitIdle(5 * time.Second)
}

// TestAdminErrorsNameTheProblem: unauthorised changes, unknown workers and
// a missing router each say so.
func TestAdminErrorsNameTheProblem(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), func(c *config.Config) { c.Admin.Token = adminToken })
	admin := "http://" + e.Cfg.AdminListen
	run := func(args ...string) string {
		out, err := exec.Command(bins["llm-router"], args...).CombinedOutput()
		if err == nil {
			t.Fatalf("llm-router %v succeeded:\n%s", args, out)
		}
		return string(out)
	}
	if out := run("drain", "a-0", "--admin", admin, "--token", "wrong"); !strings.Contains(out, "unauthorised") {
		t.Fatalf("wrong token: %s", out)
	}
	if out := run("drain", "nope", "--admin", admin, "--token", adminToken); !strings.Contains(out, `unknown worker "nope"`) {
		t.Fatalf("unknown worker: %s", out)
	}
	dead, _ := stack.FreeAddr()
	if out := run("workers", "--admin", dead); !strings.Contains(out, "connection refused") {
		t.Fatalf("no router: %s", out)
	}
	// Registration needs Envoy to reach the worker: not with static config.
	if out := run("register", "--id", "x", "--address", "127.0.0.1:1", "--model", "model-a", "--admin", admin, "--token", adminToken); !strings.Contains(out, "envoy.discovery is static") {
		t.Fatalf("static registration: %s", out)
	}
	if out := cliRun(t, admin, "stats"); !strings.Contains(out, "a-0") || !strings.Contains(out, "strategy") {
		t.Fatalf("stats: %s", out)
	}
	// The same service over gRPC, on the same port.
	conn, err := grpc.NewClient(e.Cfg.AdminListen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewAdminServiceClient(conn)
	list, err := api.ListWorkers(e.ctx, &pb.ListWorkersRequest{Model: "model-a"})
	if err != nil || len(list.GetWorkers()) != 2 {
		t.Fatalf("gRPC ListWorkers: %v %v", list, err)
	}
	_, err = api.DrainWorker(e.ctx, &pb.DrainWorkerRequest{Id: "a-0"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("gRPC drain without the token: %v", err)
	}
	authed := metadata.AppendToOutgoingContext(e.ctx, "authorization", "Bearer "+adminToken)
	if w, err := api.DrainWorker(authed, &pb.DrainWorkerRequest{Id: "a-0"}); err != nil || !w.GetDraining() {
		t.Fatalf("gRPC drain: %v %v", w, err)
	}
	if _, err := api.UndrainWorker(authed, &pb.UndrainWorkerRequest{Id: "a-0"}); err != nil {
		t.Fatal(err)
	}
}
