package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/test/stack"
)

// TestRouterKilledMidRequest: the router process that decided a
// non-streamed request is killed (SIGKILL) while the worker computes the
// answer, so the router's response phase never runs. Envoy alone must
// still strip the internal headers and name the worker that served; the
// request was decided, so it does not say fail-open. Fail-closed must leak
// nothing either.
func TestRouterKilledMidRequest(t *testing.T) {
	for _, failOpen := range []bool{true, false} {
		t.Run(fmt.Sprintf("failure_mode_allow=%v", failOpen), func(t *testing.T) {
			e := startWorkers(t, []workerSpec{{ID: "a-0", Model: "model-a", Args: []string{"--ttft-ms", "1500", "--tokens-per-second", "0"}}})
			e.Cfg.Envoy.FailureModeAllow = failOpen
			e.startRouterProcess()
			e.startEnvoy()

			type result struct {
				resp *http.Response
				body string
			}
			done := make(chan result, 1)
			go func() {
				resp, body := e.post("/v1/chat/completions", chatBody("model-a"), nil)
				done <- result{resp, body}
			}()
			// Kill the router once the worker holds the request: the
			// decision is made, the response not yet started.
			if err := stack.WaitFor(e.ctx, 10*time.Second, func() error {
				if n := e.running("a-0"); n == 0 {
					return fmt.Errorf("a-0 runs nothing yet")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e.routerProc.Kill()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("no response after the router was killed")
			}
			h := r.resp.Header
			for _, internal := range []string{"x-llm-upstream", "x-llm-upstream-host", "x-llm-cluster"} {
				if v := h.Get(internal); v != "" {
					t.Errorf("internal header %s reached the client: %q", internal, v)
				}
			}
			if v := h.Get("x-llm-fail-open"); v != "" {
				t.Errorf("a request the router decided says x-llm-fail-open: %q", v)
			}
			if failOpen && r.resp.StatusCode != http.StatusOK {
				t.Fatalf("fail-open: status %d: %s", r.resp.StatusCode, r.body)
			}
			if served := h.Get("x-gpusim-id"); served != "" && h.Get("x-routed-node") != served {
				t.Errorf("served by %q, x-routed-node %q", served, h.Get("x-routed-node"))
			}
			t.Logf("status %d, x-routed-node %q, served by %q", r.resp.StatusCode, h.Get("x-routed-node"), h.Get("x-gpusim-id"))
		})
	}
}

// startRouterProcess runs the router as its own process (so a test can
// SIGKILL it) on fresh ports, with e.Cfg written to a file.
func (e *env) startRouterProcess() {
	t := e.t
	t.Helper()
	addrs := stack.MustFreeAddrs(4)
	e.Cfg.ExtProcListen, e.Cfg.AdminListen = addrs[0], addrs[1]
	e.Cfg.Envoy.Listen, e.Cfg.Envoy.Admin = addrs[2], addrs[3]
	e.Cfg.Envoy.ExtProcAddrs = nil
	e.Cfg.LogLevel = "warn"
	if err := e.Cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	b, err := yaml.Marshal(e.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.dir, "router.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := stack.StartRouter(e.ctx, bins["llm-router"], path, e.Cfg.AdminListen, e.Cfg.ExtProcListen)
	if err != nil {
		t.Fatal(err)
	}
	e.routerProc = p
	t.Cleanup(func() { p.Stop(2 * time.Second) })
}

// running reads how many requests a gpusim worker is computing.
func (e *env) running(worker string) int {
	e.t.Helper()
	resp, err := http.Get("http://" + e.Workers[worker].Addr + "/admin/state")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Running int `json:"running"`
		Waiting int `json:"waiting"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		e.t.Fatal(err)
	}
	return st.Running + st.Waiting
}
