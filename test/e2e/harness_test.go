// Package e2e runs the router end to end through a real Envoy, with
// simulated GPU workers (gpusim processes) behind it and real clients in
// front.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/test/stack"
)

var (
	bins     map[string]string
	envoyBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llmr-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = stack.Build(dir, "llm-router", "gpusim", "llm-pd-sidecar")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// No skipping: these tests are the proof that the product works through
	// a real Envoy. `make test` installs it first.
	envoyBin, err = stack.EnvoyBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// workerSpec describes one gpusim worker of a test fleet.
type workerSpec struct {
	ID    string
	Model string
	Cap   int      // 0: 4; below 0: no max_concurrency
	Args  []string // extra gpusim flags
}

// env is a running stack: gpusim workers, an in-process router, Envoy.
type env struct {
	t       *testing.T
	ctx     context.Context
	URL     string // Envoy listener, http://host:port
	Cfg     config.Config
	Router  *app.Router
	Envoy   *stack.Envoy
	Workers map[string]*stack.Gpusim
	dir     string
	// envoyYAML, when set, edits the rendered Envoy config before Envoy
	// starts (tests that play a gateway's part).
	envoyYAML func([]byte) []byte

	routerProc *stack.Router // set by startRouterProcess instead of Router

	stopRouter context.CancelFunc
	routerDone chan error
}

// newEnv starts workers, the router (in this process, so -race covers it)
// and Envoy with the rendered config.
func newEnv(t *testing.T, workers []workerSpec, mutate func(*config.Config)) *env {
	t.Helper()
	e := startWorkers(t, workers)
	if mutate != nil {
		mutate(&e.Cfg)
	}
	e.startFront()
	return e
}

// startWorkers starts the gpusim workers and a config listing them, with
// fresh ports for the router and Envoy.
func startWorkers(t *testing.T, workers []workerSpec) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, Workers: map[string]*stack.Gpusim{}, dir: t.TempDir()}

	addrs := stack.MustFreeAddrs(len(workers))
	cfg := config.Default()
	cfg.ShutdownDelay = 0 // one Envoy, one replica per test: nothing to wait for
	cfg.ReplicaID = "e2e"
	// The tests were written against scored's placement, with capped
	// workers; a test of predicted (the default) sets it itself.
	cfg.Strategy = scoring.Scored
	cfg.ShutdownGrace = config.Duration(2 * time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(workers))
	for i, w := range workers {
		addr := addrs[i]
		cap := max(w.Cap, 0) // Cap < 0: none
		if w.Cap == 0 {
			cap = 4
		}
		cfg.Workers = append(cfg.Workers, config.Worker{ID: w.ID, Address: addr, Models: []string{w.Model}, MaxConcurrency: cap, Zone: "zone-a"})
		wg.Add(1)
		go func(w workerSpec, addr string) {
			defer wg.Done()
			args := append([]string{"--listen", addr, "--id", w.ID, "--model", w.Model}, w.Args...)
			g, err := stack.StartGpusim(ctx, bins["gpusim"], args...)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			e.Workers[w.ID] = g
			mu.Unlock()
		}(w, addr)
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, g := range e.Workers {
			g.Stop(2 * time.Second)
		}
	})
	for err := range errs {
		t.Fatal(err)
	}
	e.Cfg = cfg
	return e
}

// replica returns a copy of e for another router replica in front of the
// same workers (its own router and Envoy, after startFront).
func (e *env) replica(id string) *env {
	r := &env{t: e.t, ctx: e.ctx, Workers: e.Workers, dir: e.t.TempDir(), Cfg: e.Cfg}
	r.Cfg.ReplicaID = id
	return r
}

// startFront starts the router and an Envoy in front of it on fresh ports.
func (e *env) startFront() {
	t := e.t
	addrs := stack.MustFreeAddrs(4)
	e.Cfg.ExtProcListen, e.Cfg.AdminListen = addrs[0], addrs[1]
	e.Cfg.Envoy.Listen, e.Cfg.Envoy.Admin = addrs[2], addrs[3]
	e.Cfg.Envoy.ExtProcAddrs = nil
	if err := e.Cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	e.startRouter()
	e.startEnvoy()
}

// startEnvoy starts an Envoy rendered from e.Cfg, in front of whatever
// router listens on e.Cfg.ExtProcListen.
func (e *env) startEnvoy() {
	t := e.t
	yaml, err := envoy.Render(e.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.envoyYAML != nil {
		yaml = e.envoyYAML(yaml)
	}
	ev, err := stack.StartEnvoy(e.ctx, envoyBin, e.dir, yaml, e.Cfg.Envoy.Admin, e.Cfg.Envoy.Listen)
	if err != nil {
		t.Fatal(err)
	}
	e.Envoy = ev
	t.Cleanup(func() {
		ev.Stop(3 * time.Second)
		if t.Failed() {
			t.Logf("envoy log tail:\n%s", tailString(ev.Log(), 4000))
		}
	})
	version, err := ev.ServerVersion()
	if err != nil {
		t.Fatalf("envoy /server_info: %v", err)
	}
	t.Logf("real Envoy serving: version %s (pid %d)", version, ev.Pid())
	e.URL = "http://" + e.Cfg.Envoy.Listen
}

func (e *env) startRouter() {
	e.t.Helper()
	log := zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))
	r, err := app.New(e.ctx, e.Cfg, log)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		e.t.Fatalf("router: %v", err)
	}
	e.Router, e.stopRouter, e.routerDone = r, cancel, done
	e.t.Cleanup(e.shutdownRouter)
}

func (e *env) shutdownRouter() {
	if e.stopRouter == nil {
		return
	}
	e.stopRouter()
	<-e.routerDone
	e.stopRouter = nil
}

// inFlight reads every worker's in-flight count from a fresh snapshot.
func (e *env) inFlight() map[string]int {
	e.t.Helper()
	if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range e.Router.Scheduler().Snapshot().Workers {
		out[w.Spec.ID] = w.InFlight
	}
	return out
}

// waitIdle waits until no worker has in-flight requests.
func (e *env) waitIdle(timeout time.Duration) {
	e.t.Helper()
	err := stack.WaitFor(e.ctx, timeout, func() error {
		for id, n := range e.inFlight() {
			if n != 0 {
				return fmt.Errorf("%s has %d in flight", id, n)
			}
		}
		if n := e.Router.Scheduler().LiveClaims(); n != 0 {
			return fmt.Errorf("router holds %d claims", n)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// post sends a raw JSON body to path through Envoy.
func (e *env) post(path, body string, headers map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = copyLimited(b, resp)
	return resp, b.String()
}

func copyLimited(b *strings.Builder, resp *http.Response) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
