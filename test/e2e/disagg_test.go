package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/test/stack"
)

// Prefill/decode disaggregation through real Envoy, in both Envoy modes: a
// gpusim prefill worker, a gpusim decode engine behind the routing sidecar
// (the decode worker the router knows), both with a KV connector. A long
// uncached prompt is disaggregated: routed to the decode worker with the
// prefill worker in x-prefiller-host-port, the prefill worker computes one
// token (max_tokens 1), the decode engine loads the KV and decodes. The
// same prompt again is cached on the decode worker and runs aggregated.
// With the prefill worker killed, a disaggregated request is still served
// (the sidecar prefills locally), and no claim leaks.
func TestDisaggregatedServing(t *testing.T) {
	for _, mode := range []string{config.ModeClusterHeader, config.ModeEndpointPicker} {
		t.Run(mode, func(t *testing.T) { disaggregatedServing(t, mode) })
	}
}

// A decode worker (its pod: sidecar and engine) dies; the router has not
// noticed and sends it a disaggregated request, drawn by the prefix it
// served before: Envoy retries on the model's other workers as for any
// request, the request is served, the claim follows it and none leaks.
func TestDisaggregatedDecodeWorkerDies(t *testing.T) {
	f := startPD(t, config.ModeClusterHeader, 2)
	base := prompt("gamma", 1000)
	_, home, _ := f.completion("dd-1", base, 4, false)
	if home != "d-0" && home != "d-1" {
		t.Fatalf("first request served by %q, want a decode worker", home)
	}
	f.waitIdle(10 * time.Second)
	f.sidecars[home].Stop(time.Second)
	f.Workers[home].Stop(time.Second)

	// The prefix draws the request to home; its new two thirds are
	// uncached (under half would keep it aggregated).
	_, routed, out := f.completion("dd-2", base+prompt("delta", 2000), 4, true)
	if routed == home || routed == "" {
		t.Fatalf("served by %q, the dead worker was %s: %s", routed, home, tailString(out, 300))
	}
	d := f.decision("dd-2")
	if d.Worker != home || d.Disaggregation == nil || !d.Disaggregation.Disaggregated || d.Result.ServedBy != routed {
		t.Fatalf("decision: picked %s, served by %s, disaggregation %+v; want %s picked, the retry's worker serving", d.Worker, d.Result.ServedBy, d.Disaggregation, home)
	}
	f.waitIdle(10 * time.Second)
}

// pdFleet is a disaggregated fleet: gpusim prefill worker p-0 and decode
// workers d-0.. (gpusim engines behind llm-pd-sidecar, the address the
// router knows), all with a KV link.
type pdFleet struct {
	*env
	sidecars map[string]*stack.Proc // by decode worker
}

func startPD(t *testing.T, mode string, decoders int) *pdFleet {
	t.Helper()
	link := []string{"--kv-link-gbps", "100", "--tokens-per-second", "400", "--ttft-ms", "5"}
	specs := []workerSpec{{ID: "p-0", Model: "m", Args: link}}
	for i := range decoders {
		specs = append(specs, workerSpec{ID: fmt.Sprintf("d-%d", i), Model: "m", Args: link})
	}
	f := &pdFleet{env: startWorkers(t, specs), sidecars: map[string]*stack.Proc{}}
	addrs := stack.MustFreeAddrs(decoders)
	for i := range f.Cfg.Workers {
		w := &f.Cfg.Workers[i]
		if w.ID == "p-0" {
			w.Role = string(state.RolePrefill)
			continue
		}
		addr := addrs[len(f.sidecars)]
		sc, err := stack.Start("llm-pd-sidecar "+w.ID, bins["llm-pd-sidecar"], []string{"--listen", addr, "--decoder", "http://" + w.Address, "--prefill-timeout", "5s"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Stop(2 * time.Second) })
		if err := stack.WaitTCP(f.ctx, addr, 10*time.Second); err != nil {
			t.Fatalf("sidecar: %v\n%s", err, sc.Log())
		}
		f.sidecars[w.ID] = sc
		w.Role, w.Address = string(state.RoleDecode), addr
	}
	f.Cfg.Disaggregation.MinUncachedTokens = 256
	if mode == config.ModeEndpointPicker {
		f.Cfg.Envoy.Mode = config.ModeEndpointPicker
		f.Cfg.TLS.ExtProc = true
		f.envoyYAML = fullDuplex(t)
	}
	f.startFront()
	return f
}

func disaggregatedServing(t *testing.T, mode string) {
	f := startPD(t, mode, 1)
	e := f.env
	prefillAddr, engineAddr := e.Workers["p-0"].Addr, e.Workers["d-0"].Addr

	// 1. A long uncached prompt, streamed: disaggregated.
	long := prompt("alpha", 3000)
	served, routed, out := e.completion("pd-1", long, 8, true, "x-prefiller-host-port", "6.6.6.6:1")
	if served != "disaggregated" || routed != "d-0" {
		t.Fatalf("long uncached prompt served %q by the sidecar: %s", served, tailString(out, 400))
	}
	d := e.decision("pd-1")
	if dis := d.Disaggregation; d.Worker != "d-0" || dis == nil || !dis.Disaggregated || dis.Worker != "p-0" || dis.UncachedTokens < 256 {
		t.Fatalf("decision: worker %s, disaggregation %+v", d.Worker, d.Disaggregation)
	}
	// The prefill worker ran one request of one output token; the decode
	// engine loaded its KV and produced the output.
	if n := metric(t, prefillAddr, "vllm:generation_tokens_total"); n != 1 {
		t.Fatalf("prefill worker generated %v tokens, want 1 (max_tokens 1)", n)
	}
	if n := metric(t, engineAddr, "vllm:nixl_xfer_time_seconds_count"); n != 1 {
		t.Fatalf("decode engine loaded KV %v times, want 1", n)
	}
	if n := metric(t, engineAddr, "vllm:generation_tokens_total"); n != 8 {
		t.Fatalf("decode engine generated %v tokens, want 8", n)
	}
	e.waitIdle(10 * time.Second)

	// 2. The same prompt with a short turn appended: cached on d-0, it
	// stays aggregated, and the prefill worker sees nothing.
	served, routed, out = e.completion("pd-2", long+" and one more short question?", 4, false)
	if served != "aggregated" || routed != "d-0" {
		t.Fatalf("mostly cached prompt served %q: %s", served, tailString(out, 400))
	}
	if dis := e.decision("pd-2").Disaggregation; dis == nil || dis.Disaggregated || dis.UncachedTokens >= 256 {
		t.Fatalf("mostly cached prompt's decision: %+v", dis)
	}
	if n := metric(t, prefillAddr, "vllm:generation_tokens_total"); n != 1 {
		t.Fatalf("prefill worker generated %v tokens after a cached prompt, want still 1", n)
	}
	e.waitIdle(10 * time.Second)

	// 3. The prefill worker dies; before the router notices, a long
	// uncached prompt is disaggregated to it: the sidecar prefills locally
	// and the request is served; both claims are given back.
	e.Workers["p-0"].Stop(time.Second)
	served, routed, out = e.completion("pd-3", prompt("beta", 3000), 4, true)
	if served != "fallback" || routed != "d-0" {
		t.Fatalf("prefill worker down: served %q: %s", served, tailString(out, 400))
	}
	if dis := e.decision("pd-3").Disaggregation; dis == nil || !dis.Disaggregated || dis.Worker != "p-0" {
		t.Fatalf("prefill worker down, decision: %+v", dis)
	}
	e.waitIdle(10 * time.Second)
	// The sidecar's fallback counted as a failed request of p-0.
	for _, w := range e.Router.Scheduler().Snapshot().Workers {
		if w.Spec.ID == "p-0" && w.Stats.Errors != 1 {
			t.Fatalf("p-0's failed requests: %d, want 1 (the fallback)", w.Stats.Errors)
		}
	}
}

// prompt is about tokens tokens of text (4 bytes each, as the router
// estimates), distinct per seed.
func prompt(seed string, tokens int) string {
	var b strings.Builder
	for i := 0; b.Len() < 4*tokens; i++ {
		fmt.Fprintf(&b, "%s %d ", seed, i)
	}
	return b.String()
}

// completion sends a completions request with id, streamed or not, and
// returns how the sidecar served it (x-pd-served), the worker that served
// (x-routed-node) and the body; it fails the test on any status but 200.
func (e *env) completion(id, text string, maxTokens int, stream bool, headers ...string) (served, routed, body string) {
	e.t.Helper()
	raw, err := json.Marshal(map[string]any{"model": "m", "prompt": text, "max_tokens": maxTokens, "stream": stream})
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.URL+"/v1/completions", strings.NewReader(string(raw)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-request-id", id)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("request %s: status %d: %s", id, resp.StatusCode, tailString(string(b), 400))
	}
	return resp.Header.Get("x-pd-served"), resp.Header.Get("x-routed-node"), string(b)
}

// decision reads request id's decision from the admin port, as explain
// does, once its result is recorded.
func (e *env) decision(id string) *scheduler.Decision {
	e.t.Helper()
	var d scheduler.Decision
	err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
		resp, err := http.Get("http://" + e.Cfg.AdminListen + "/decisions/" + id)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		d = scheduler.Decision{}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			return stack.Permanent(err)
		}
		if d.Result == nil {
			return fmt.Errorf("no result yet")
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("decision %s: %v", id, err)
	}
	return &d
}

// metric sums the samples of a Prometheus metric on gpusim's /metrics.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q", name, line)
		}
		sum += v
	}
	return sum
}
