package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// eppConfig puts the router in endpoint-picker mode behind an Envoy set up
// as a gateway sets it up for an InferencePool, over TLS: zones make the
// scores distinct (a-0 local, a-1 same region, a-2 elsewhere) and only the
// in-flight count and the distance are weighed, so the order of picks is
// known in advance.
func eppConfig(mode string) func(*config.Config) {
	return func(c *config.Config) {
		c.Envoy.Mode = mode
		c.TLS.ExtProc = true
		c.Locality = config.Locality{Zone: "zone-a", Region: "r1"}
		zones := map[string][2]string{"a-0": {"zone-a", "r1"}, "a-1": {"zone-b", "r1"}, "a-2": {"zone-c", "r2"}}
		for i, w := range c.Workers {
			c.Workers[i].Zone, c.Workers[i].Region = zones[w.ID][0], zones[w.ID][1]
		}
		c.Scoring.Weights = config.Weights{Active: 100, Distance: 1}
		// Passive failures decide health here, not a check racing the test.
		c.Health.CheckInterval = config.Duration(time.Minute)
	}
}

// fullDuplex turns the rendered endpoint-picker config into what gateways
// run: bodies FULL_DUPLEX_STREAMED both ways, trailers sent, no mode
// overrides (Envoy supports none under full duplex).
func fullDuplex(t *testing.T) func([]byte) []byte {
	return func(y []byte) []byte {
		s := string(y)
		for _, r := range [][2]string{
			{"request_body_mode: BUFFERED", "request_body_mode: FULL_DUPLEX_STREAMED"},
			{"request_trailer_mode: SKIP", "request_trailer_mode: SEND"},
			{"response_body_mode: NONE", "response_body_mode: FULL_DUPLEX_STREAMED"},
			{"response_trailer_mode: SKIP", "response_trailer_mode: SEND"},
			{"allow_mode_override: true", "allow_mode_override: false"},
		} {
			if !strings.Contains(s, r[0]) {
				t.Fatalf("rendered config lacks %q", r[0])
			}
			s = strings.Replace(s, r[0], r[1], 1)
		}
		return []byte(s)
	}
}

// Envoy's body modes under endpoint-picker mode: the rendered config's
// (buffered request bodies) and the gateways' (full duplex).
var bodyModes = []string{"buffered", "full_duplex"}

func poolOfThree(args ...string) []workerSpec {
	return []workerSpec{
		{ID: "a-0", Model: "m", Args: args},
		{ID: "a-1", Model: "m", Args: args},
		{ID: "a-2", Model: "m", Args: args},
	}
}

const eppChat = `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`

// eppServed sends one chat request and returns the status, the worker that
// answered (gpusim's own header) and the router's x-routed-node.
func (e *env) eppServed(body string, headers ...string) (status int, worker, routed string) {
	e.t.Helper()
	status, worker, routed, _ = e.eppServedBody(body, headers...)
	return status, worker, routed
}

func (e *env) eppServedBody(body string, headers ...string) (status int, worker, routed, out string) {
	e.t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	resp, out := e.post("/v1/chat/completions", body, h)
	if resp.StatusCode == 200 && !strings.Contains(out, "choices") {
		e.t.Fatalf("200 without a completion: %s", out)
	}
	return resp.StatusCode, resp.Header.Get("x-gpusim-id"), resp.Header.Get("x-routed-node"), out
}

// holdSequence opens n streamed requests one after another, each held open
// once its headers are in, and returns the worker of each in order.
func (e *env) holdSequence(n int) []string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var order []string
	for i := range n {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hold %d"}],"max_tokens":400,"stream":true}`, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			e.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("x-gpusim-id") != resp.Header.Get("x-routed-node") {
			e.t.Fatalf("hold %d: status %d, served by %q, routed %q", i, resp.StatusCode, resp.Header.Get("x-gpusim-id"), resp.Header.Get("x-routed-node"))
		}
		// The first event proves the stream runs through the router's
		// full-duplex response path.
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			e.t.Fatalf("hold %d: %v", i, err)
		}
		order = append(order, resp.Header.Get("x-routed-node"))
	}
	cancel()
	return order
}

// The same request stream lands on the same workers in endpoint-picker
// mode (through override_host) as in cluster-header mode.
func TestEPPSameWorkersAsClusterHeader(t *testing.T) {
	want := []string{"a-0", "a-1", "a-2", "a-0", "a-1", "a-2", "a-0", "a-1"}
	for _, mode := range []string{config.ModeClusterHeader, config.ModeEndpointPicker, config.ModeEndpointPicker + "/full_duplex"} {
		t.Run(mode, func(t *testing.T) {
			e := startWorkers(t, poolOfThree("--tokens-per-second", "5", "--ttft-ms", "0"))
			eppConfig(strings.TrimSuffix(mode, "/full_duplex"))(&e.Cfg)
			if strings.HasSuffix(mode, "/full_duplex") {
				e.envoyYAML = fullDuplex(t)
			}
			e.startFront()
			got := e.holdSequence(len(want))
			if !slices.Equal(got, want) {
				t.Fatalf("%s: workers %v, want %v", mode, got, want)
			}
			e.waitIdle(10 * time.Second)
		})
	}
}

// The picked endpoint serves; a picked endpoint that refuses connections
// is passed over for the first fallback, and the claim follows (the served
// endpoint comes back in envoy.lb metadata); with the router down, Envoy
// serves fail-open through the pool's own policy.
func TestEPPPickFallbackAndFailOpen(t *testing.T) {
	for _, mode := range bodyModes {
		t.Run(mode, func(t *testing.T) { testPickFallbackAndFailOpen(t, mode) })
	}
}

func testPickFallbackAndFailOpen(t *testing.T, mode string) {
	e := startWorkers(t, poolOfThree("--tokens-per-second", "0", "--ttft-ms", "0"))
	eppConfig(config.ModeEndpointPicker)(&e.Cfg)
	e.Cfg.Envoy.Fallbacks = 2 // opt-in: the rendered config's override_host retries down the list
	if mode == "full_duplex" {
		e.envoyYAML = fullDuplex(t)
	}
	e.startFront()
	for i := range 3 {
		if status, worker, routed := e.eppServed(eppChat); status != 200 || worker != "a-0" || routed != "a-0" {
			t.Fatalf("request %d: status %d, served by %q, routed %q; want a-0, the best score", i, status, worker, routed)
		}
	}
	e.waitIdle(5 * time.Second)

	e.Workers["a-0"].Kill()
	// Twice (under the passive-failure threshold, so a-0 stays the pick):
	// the pool's own policy would land on a-1 only by chance.
	for i := range 2 {
		id := fmt.Sprintf("refused-then-fallback-%d", i)
		status, worker, routed := e.eppServed(eppChat, "x-request-id", id)
		if status != 200 || worker != "a-1" || routed != "a-1" {
			t.Fatalf("after a-0 died: status %d, served by %q, routed %q; want the first fallback a-1", status, worker, routed)
		}
		err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
			d, ok := e.Router.Decision(id)
			if !ok || d.Result == nil {
				return fmt.Errorf("no finished decision yet")
			}
			if d.Worker != "a-0" || d.Result.ServedBy != "a-1" {
				return stack.Permanent(fmt.Errorf("picked %s, served by %s; want a-0 then a-1", d.Worker, d.Result.ServedBy))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.waitIdle(5 * time.Second)

	e.shutdownRouter()
	status, worker, _, out := e.eppServedBody(eppChat)
	if mode == "full_duplex" {
		// Envoy fails open under full duplex only before the first body
		// chunk reaches the processor: a request with a body gets 503.
		if status != 503 {
			t.Fatalf("full duplex, router down: status %d, served by %q; Envoy fails open here now: update docs/gateways.md", status, worker)
		}
		return
	}
	if status != 200 || (worker != "a-1" && worker != "a-2") {
		t.Fatalf("fail-open: status %d, served by %q: %s", status, worker, out)
	}
}

// The gateway's subset hint, set in metadata by a filter ahead of ext_proc
// as gateways do: the pick comes only from it, and 503 when nothing in it
// is eligible.
func TestEPPSubsetHint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		subset func(e *env) string
		status int
		worker string
		code   string
	}{
		{"restricts", func(e *env) string { return e.addrOf("a-2") }, 200, "a-2", ""},
		{"nothing eligible", func(*env) string { return "127.0.0.1:1" }, 503, "", `"code":"no_healthy_worker"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWorkers(t, poolOfThree("--tokens-per-second", "0", "--ttft-ms", "0"))
			eppConfig(config.ModeEndpointPicker)(&e.Cfg)
			duplex := fullDuplex(t)
			e.envoyYAML = func(y []byte) []byte {
				y = duplex(y)
				filter := `          - name: envoy.filters.http.set_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config
              metadata:
              - metadata_namespace: envoy.lb.subset_hint
                value: { x-gateway-destination-endpoint-subset: ["` + tc.subset(e) + `"] }
`
				const anchor = "          - name: envoy.filters.http.ext_proc\n"
				if !strings.Contains(string(y), anchor) {
					t.Fatal("no ext_proc filter in the rendered config")
				}
				return []byte(strings.Replace(string(y), anchor, filter+anchor, 1))
			}
			e.startFront()
			for i := range 3 {
				status, worker, _, out := e.eppServedBody(eppChat)
				if status != tc.status || worker != tc.worker || !strings.Contains(out, tc.code) {
					t.Fatalf("request %d: status %d served by %q (%s), want %d by %q", i, status, worker, out, tc.status, tc.worker)
				}
			}
		})
	}
}

// 429 when the router sheds: every endpoint at its cap, queueing off.
func TestEPPShedding(t *testing.T) {
	workers := []workerSpec{{ID: "a-0", Model: "m", Cap: 1, Args: []string{"--tokens-per-second", "5", "--ttft-ms", "0"}}}
	e := startWorkers(t, workers)
	eppConfig(config.ModeEndpointPicker)(&e.Cfg)
	e.Cfg.Queue.MaxQueueSize = 0
	e.envoyYAML = fullDuplex(t)
	e.startFront()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":400,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if status, _, _, out := e.eppServedBody(eppChat); status != 429 || !strings.Contains(out, "at_capacity") {
		t.Fatalf("status %d (%s) with the only endpoint at its cap, want 429", status, out)
	}
	cancel()
	e.waitIdle(5 * time.Second)
}

// The protocol's health services answer over the TLS listener, on every
// replica at once.
func TestEPPHealthServicesOverTLS(t *testing.T) {
	e := startWorkers(t, poolOfThree())
	eppConfig(config.ModeEndpointPicker)(&e.Cfg)
	e.startFront()
	other := e.replica("second")
	other.startFront()
	for _, r := range []*env{e, other} {
		conn, err := grpc.NewClient(r.Cfg.ExtProcListen, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // the router's self-signed certificate
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, svc := range []string{"liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
			res, err := healthpb.NewHealthClient(conn).Check(e.ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("%s %s: %v %v", r.Cfg.ReplicaID, svc, res.GetStatus(), err)
			}
		}
	}
}

func (e *env) addrOf(id string) string {
	for _, w := range e.Cfg.Workers {
		if w.ID == id {
			return w.Address
		}
	}
	e.t.Fatalf("no worker %s", id)
	return ""
}
