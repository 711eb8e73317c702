package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// The Gateway API Inference Extension's conformance cases that concern the
// endpoint picker (its repository's conformance/tests), run against
// llm-router with default settings behind Envoy configured as gateways
// configure it. The suite itself needs a cluster and the reference
// conformance picker, which returns the pods a test header names; here
// the router decides, and each test checks the same property on the
// router's own decisions.

// Mirrors GatewayFollowingEPPRouting (gateway_following_epp_routing.go):
// 100 requests, 10 at a time, each served by an endpoint the picker
// returned, on each gateway shape.
func TestConformanceGatewayFollowingEPPRouting(t *testing.T) {
	for _, shape := range gatewayShapes {
		t.Run(shape.name, func(t *testing.T) {
			e, _ := startGateway(t, shape, true)
			const total, concurrent = 100, 10
			var mu sync.Mutex
			var errs []string
			sem := make(chan struct{}, concurrent)
			var wg sync.WaitGroup
			for i := range total {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					status, worker, routed, err := postOnce(e, "pool.test", eppChat)
					if err == nil && (status != 200 || worker == "" || worker != routed) {
						err = fmt.Errorf("request %d: status %d, served by %q, picker named %q", i, status, worker, routed)
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d of %d requests did not follow the picker: %s", len(errs), total, strings.Join(errs[:min(len(errs), 5)], "; "))
			}
			e.waitIdle(10 * time.Second)
		})
	}
}

// postOnce is gatewayPost for goroutines: errors are returned, not fatal.
func postOnce(e *env, host, body string) (status int, worker, routed string, err error) {
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = copyLimited(b, resp)
	return resp.StatusCode, resp.Header.Get("x-gpusim-id"), resp.Header.Get("x-routed-node"), nil
}

// Mirrors GatewayDestinationEndpointServed
// (gateway_destination_endpoint_served.go): the gateway reports the
// endpoint that served in envoy.lb metadata, and it is the one the picker
// chose. The rendered config reports it (override_host's
// selected_host_key); the decision records show what the router read.
func TestConformanceGatewayDestinationEndpointServed(t *testing.T) {
	e := startWorkers(t, poolOfThree("--tokens-per-second", "200", "--ttft-ms", "0"))
	e.Cfg.Envoy.Mode = config.ModeEndpointPicker
	e.Cfg.TLS.ExtProc = true
	e.envoyYAML = fullDuplex(t)
	e.startFront()
	for i := range 6 {
		id := fmt.Sprintf("served-%d", i)
		status, worker, routed := e.eppServed(eppChat, "x-request-id", id)
		if status != 200 || worker != routed {
			t.Fatalf("request %d: status %d, served by %q, routed %q", i, status, worker, routed)
		}
		err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
			d, ok := e.Router.Decision(id)
			if !ok || d.Result == nil {
				return fmt.Errorf("no finished decision yet")
			}
			if d.Result.ServedBy != worker || d.Worker != worker {
				return stack.Permanent(fmt.Errorf("picked %s, reported served by %s, answered by %s", d.Worker, d.Result.ServedBy, worker))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Mirrors EppUnAvailableFailOpen (epp_unavailable_fail_open.go): with the
// picker answering, its pick serves; with no picker, a FailOpen pool still
// serves from some endpoint. On the gateway shapes that can: override_host
// with buffered request bodies (TestGatewayShapes covers the others and
// why they cannot).
func TestConformanceEppUnAvailableFailOpen(t *testing.T) {
	e, second := startGateway(t, gatewayShapes[1], false)
	if status, worker, routed, out := e.gatewayPost(failOpenHost, eppChat); status != 200 || worker != routed {
		t.Fatalf("phase 1, picker up: status %d, served by %q, routed %q: %s", status, worker, routed, out)
	}
	e.shutdownRouter()
	second.shutdownRouter()
	for i := range 3 {
		if status, worker, _, out := e.gatewayPost(failOpenHost, eppChat); status != 200 || worker == "" {
			t.Fatalf("phase 2, picker down, request %d: status %d: %s", i, status, out)
		}
	}
}

// Mirrors HTTPRouteMultipleRulesDifferentPools
// (inferencepool_multiple_rules_different_pools.go): one gateway, two
// rules, two pools each with its own picker (kgateway's per-route ext_proc
// override names the pool's picker cluster) and ORIGINAL_DST cluster; every
// request lands in its rule's pool. The suite matches on path prefixes;
// here a header, since the router serves the OpenAI paths.
func TestConformanceHTTPRouteMultipleRulesDifferentPools(t *testing.T) {
	primary := startWorkers(t, poolOfThree("--tokens-per-second", "200", "--ttft-ms", "0"))
	secondary := startWorkers(t, []workerSpec{{ID: "b-0", Model: "m"}, {ID: "b-1", Model: "m"}})
	for _, p := range []*env{primary, secondary} {
		p.Cfg.Envoy.Mode = config.ModeEndpointPicker
		p.Cfg.TLS.ExtProc = true
	}
	addrs := stack.MustFreeAddrs(2)
	secondary.Cfg.ExtProcListen, secondary.Cfg.AdminListen = addrs[0], addrs[1]
	secondary.startRouter()
	primary.envoyYAML = func([]byte) []byte {
		y := string(gatewayYAML(t, primary, gatewayShapes[0], true, []string{primary.Cfg.ExtProcListen}))
		// The second rule, ahead of the catch-all, to the second pool
		// through its own picker.
		const anchor = "            - name: fail-closed\n"
		rule := `            - name: secondary
              domains: ["secondary.test", "secondary.test:*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: pool2, timeout: 300s }
                typed_per_filter_config:
                  envoy.filters.http.ext_proc:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute
                    overrides:
                      grpc_service:
                        envoy_grpc: { cluster_name: endpointpicker2, authority: "llm-router-2.llm.svc:9002" }
                        timeout: 10s
`
		picker2 := splitHostPort(t, secondary.Cfg.ExtProcListen)
		clusters := fmt.Sprintf(`  - name: pool2
    type: ORIGINAL_DST
    lb_policy: CLUSTER_PROVIDED
    connect_timeout: 10s
    original_dst_lb_config: { use_http_header: true, http_header_name: x-gateway-destination-endpoint }
  - name: endpointpicker2
    type: STATIC
    connect_timeout: 10s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context: { validation_context: {} }
    load_assignment:
      cluster_name: endpointpicker2
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: %s, port_value: %s } } }
`, picker2.Host, picker2.Port)
		if !strings.Contains(y, anchor) || !strings.Contains(y, "  clusters:\n") {
			t.Fatal("gateway config lacks its anchors")
		}
		y = strings.Replace(y, anchor, rule+anchor, 1)
		y = strings.Replace(y, "  clusters:\n", "  clusters:\n"+clusters, 1)
		return []byte(y)
	}
	primary.startFront()
	for i := range 10 {
		for _, rule := range []struct{ host, prefix string }{{"pool.test", "a-"}, {"secondary.test", "b-"}} {
			status, worker, routed, out := primary.gatewayPost(rule.host, eppChat)
			if status != 200 || !strings.HasPrefix(worker, rule.prefix) || worker != routed {
				t.Fatalf("request %d to %s: status %d, served by %q, routed %q: %s", i, rule.host, status, worker, routed, out)
			}
		}
	}
}
