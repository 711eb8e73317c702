package e2e

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// The Envoy configurations the gateways that implement the Gateway API
// Inference Extension generate for an InferencePool, written out by hand,
// and the router behind them with its default settings. Each gateway's own
// translation is the source; what the test leaves out is said beside it.
//
// Two shapes of the pool's cluster, the only part that decides whether the
// router's destination routes:
//
//   - original_dst: an ORIGINAL_DST cluster that reads the destination from
//     the x-gateway-destination-endpoint header as one address. kgateway
//     (internal/kgateway/extensions2/plugins/inferenceextension/endpointpicker/
//     plugin.go: processBackendObjIR sets ORIGINAL_DST, CLUSTER_PROVIDED and
//     original_dst_lb_config with use_http_header, circuit breakers at 40000;
//     its ext_proc filter is FULL_DUPLEX_STREAMED both ways, trailers SEND,
//     message_timeout 5s, a per-route override carrying the pool's
//     failureMode, TLS to the picker without verification, HTTP/2, and
//     metadata namespaces envoy.lb.subset_hint out and envoy.lb in). Envoy
//     Gateway, through Envoy AI Gateway's extension server
//     (envoyproxy/ai-gateway internal/extensionserver/post_cluster_modify.go
//     and inferencepool.go: the same cluster with a 10s connect timeout, and
//     an ext_proc filter FULL_DUPLEX_STREAMED, failure_mode_allow false).
//     Simplified: no header_to_metadata filter (kgateway copies the header
//     into envoy.lb metadata for its own use; the cluster reads the header),
//     no subset hint (kgateway lists the pool's pods in it), the picker
//     cluster STATIC rather than STRICT_DNS on the picker's Service.
//   - override_host: the pool's endpoints in a cluster whose override_host
//     load-balancing policy reads the destination from the envoy.lb dynamic
//     metadata, falling back to round robin. Istio (its InferencePool
//     "shadow" Service cluster, as `istioctl proxy-config cluster` shows it:
//     override_host_sources metadata envoy.lb / x-gateway-destination-endpoint,
//     fallback_policy round_robin; failureMode becomes failure_mode_allow;
//     Istio's default retry policy on the route). Simplified: a STATIC
//     cluster for Istio's EDS one, and no Istio mTLS to the workers.
//
// Both shapes run in both body modes: FULL_DUPLEX_STREAMED (what the
// gateways above configure) and BUFFERED request bodies (the rendered
// config's, and kgateway's before it moved to full duplex). The picker is
// two router replicas behind one ext_proc cluster, over TLS, as a Service
// with two pods. One virtual host stands for a pool with failureMode
// FailOpen (a per-route failure_mode_allow override, as kgateway writes
// it), the other for FailClose (the InferencePool default).
type gatewayShape struct {
	name     string
	gateways string
	cluster  string // "original_dst" or "override_host"
}

var gatewayShapes = []gatewayShape{
	{name: "original_dst_header", gateways: "kgateway, Envoy Gateway", cluster: "original_dst"},
	{name: "override_host_metadata", gateways: "Istio", cluster: "override_host"},
}

// failOpenHost is the virtual host whose pool fails open.
const failOpenHost = "fail-open.test"

var gatewayEnvoy = template.Must(template.New("gateway").Parse(`
admin:
  address: { socket_address: { address: {{.Admin.Host}}, port_value: {{.Admin.Port}} } }
static_resources:
  listeners:
  - name: gateway
    address: { socket_address: { address: {{.Listen.Host}}, port_value: {{.Listen.Port}} } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: gateway
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc: { cluster_name: endpointpicker, authority: "llm-router.llm.svc:9002" }
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
{{- if .Duplex}}
                request_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_body_mode: FULL_DUPLEX_STREAMED
                response_trailer_mode: SEND
{{- else}}
                request_body_mode: BUFFERED
                request_trailer_mode: SKIP
                response_body_mode: NONE
                response_trailer_mode: SKIP
              allow_mode_override: true
{{- end}}
              message_timeout: 5s
              failure_mode_allow: false
              metadata_options:
                forwarding_namespaces: { untyped: [envoy.lb.subset_hint] }
                receiving_namespaces: { untyped: [envoy.lb] }
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          route_config:
            name: gateway
            virtual_hosts:
            - name: fail-open
              domains: ["{{.FailOpenHost}}", "{{.FailOpenHost}}:*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: pool, timeout: 300s{{if .IstioRetries}}, retry_policy: { {{.IstioRetries}} }{{end}} }
                typed_per_filter_config:
                  envoy.filters.http.ext_proc:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute
                    overrides: { failure_mode_allow: true }
            - name: fail-closed
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: pool, timeout: 300s{{if .IstioRetries}}, retry_policy: { {{.IstioRetries}} }{{end}} }
  clusters:
{{- if eq .Cluster "original_dst"}}
  - name: pool
    type: ORIGINAL_DST
    lb_policy: CLUSTER_PROVIDED
    connect_timeout: 10s
    original_dst_lb_config: { use_http_header: true, http_header_name: x-gateway-destination-endpoint }
    circuit_breakers:
      thresholds: [{ max_connections: 40000, max_pending_requests: 40000, max_requests: 40000 }]
{{- else}}
  - name: pool
    type: STATIC
    connect_timeout: 10s
    load_balancing_policy:
      policies:
      - typed_extension_config:
          name: envoy.load_balancing_policies.override_host
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost
            override_host_sources:
            - metadata: { key: envoy.lb, path: [{ key: x-gateway-destination-endpoint }] }
            fallback_policy:
              policies:
              - typed_extension_config:
                  name: envoy.load_balancing_policies.round_robin
                  typed_config:
                    "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin
    load_assignment:
      cluster_name: pool
      endpoints:
      - lb_endpoints:
{{- range .Workers}}
        - endpoint: { address: { socket_address: { address: {{.Host}}, port_value: {{.Port}} } } }
{{- end}}
{{- end}}
  - name: endpointpicker
    type: STATIC
    connect_timeout: 10s
    lb_policy: LEAST_REQUEST
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
      cluster_name: endpointpicker
      endpoints:
      - lb_endpoints:
{{- range .Pickers}}
        - endpoint: { address: { socket_address: { address: {{.Host}}, port_value: {{.Port}} } } }
{{- end}}
`))

// istioRetries is Istio's default HTTP retry policy (two attempts, another
// host each time), which its gateways put on every route.
const istioRetries = `retry_on: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", num_retries: 2, retry_host_predicate: [{ name: envoy.retry_host_predicates.previous_hosts, typed_config: { "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate } }], host_selection_retry_max_attempts: 5`

type hostPort struct {
	Host string
	Port string
}

func splitHostPort(t *testing.T, addr string) hostPort {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return hostPort{h, p}
}

// gatewayYAML renders the gateway's Envoy config for e's workers, with
// pickers as the endpoint-picker Service's pods.
func gatewayYAML(t *testing.T, e *env, shape gatewayShape, duplex bool, pickers []string) []byte {
	t.Helper()
	data := map[string]any{
		"Admin": splitHostPort(t, e.Cfg.Envoy.Admin), "Listen": splitHostPort(t, e.Cfg.Envoy.Listen),
		"Duplex": duplex, "Cluster": shape.cluster, "FailOpenHost": failOpenHost,
	}
	if shape.cluster == "override_host" {
		data["IstioRetries"] = istioRetries
	}
	var workers, picks []hostPort
	for _, w := range e.Cfg.Workers {
		workers = append(workers, splitHostPort(t, w.Address))
	}
	for _, p := range pickers {
		picks = append(picks, splitHostPort(t, p))
	}
	data["Workers"], data["Pickers"] = workers, picks
	var b bytes.Buffer
	if err := gatewayEnvoy.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// startGateway starts two router replicas in endpoint-picker mode with
// every other setting at its default (unless mutate changes it), and Envoy
// configured as the gateway shape configures it in front of them.
func startGateway(t *testing.T, shape gatewayShape, duplex bool, mutate ...func(*config.Config)) (e *env, second *env) {
	t.Helper()
	e = startWorkers(t, poolOfThree("--tokens-per-second", "200", "--ttft-ms", "0"))
	e.Cfg.Envoy.Mode = config.ModeEndpointPicker
	e.Cfg.TLS.ExtProc = true
	if e.Cfg.Envoy.Fallbacks != 0 {
		t.Fatalf("default envoy.fallbacks %d: ORIGINAL_DST gateways route nothing on a list", e.Cfg.Envoy.Fallbacks)
	}
	for _, m := range mutate {
		m(&e.Cfg)
	}
	second = e.replica("second")
	addrs := stack.MustFreeAddrs(2)
	second.Cfg.ExtProcListen, second.Cfg.AdminListen = addrs[0], addrs[1]
	second.startRouter()
	e.envoyYAML = func([]byte) []byte {
		return gatewayYAML(t, e, shape, duplex, []string{e.Cfg.ExtProcListen, second.Cfg.ExtProcListen})
	}
	e.startFront()
	return e, second
}

// gatewayPost sends one chat request to host through the gateway and
// returns the status, the worker that answered and the router's
// x-routed-node.
func (e *env) gatewayPost(host, body string) (status int, worker, routed, out string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = copyLimited(b, resp)
	return resp.StatusCode, resp.Header.Get("x-gpusim-id"), resp.Header.Get("x-routed-node"), b.String()
}

// TestGatewayShapes runs the router with its default settings behind each
// gateway's Envoy configuration, in both body modes: every request routes,
// streams stream, a killed worker is left out, and a pool fails open or
// closed as its failureMode says.
func TestGatewayShapes(t *testing.T) {
	for _, shape := range gatewayShapes {
		for _, mode := range bodyModes {
			t.Run(shape.name+"/"+mode, func(t *testing.T) {
				t.Logf("as %s configure it", shape.gateways)
				testGatewayShape(t, shape, mode == "full_duplex")
			})
		}
	}
}

func testGatewayShape(t *testing.T, shape gatewayShape, duplex bool) {
	e, second := startGateway(t, shape, duplex)

	// Every request routes, on both virtual hosts, to the worker the
	// router picked.
	served := map[string]int{}
	for i := range 20 {
		host := []string{"pool.test", failOpenHost}[i%2]
		status, worker, routed, out := e.gatewayPost(host, eppChat)
		if status != 200 || worker == "" || worker != routed {
			t.Fatalf("request %d: status %d, served by %q, routed %q: %s", i, status, worker, routed, out)
		}
		served[worker]++
	}
	t.Logf("served: %v", served)

	// A streamed answer arrives event by event, to the end.
	status, events := e.gatewayStream(`{"model":"m","messages":[{"role":"user","content":"stream"}],"max_tokens":8,"stream":true}`)
	if status != 200 || events < 3 {
		t.Fatalf("stream: status %d, %d events", status, events)
	}
	e.waitIdle(5 * time.Second)

	// A killed worker, the one the router prefers at rest: requests it is
	// picked for fail until the router marks it down (passive failures,
	// per replica; Istio's retries hide them), then none goes there.
	killed := ""
	for w, n := range served {
		if killed == "" || n > served[killed] {
			killed = w
		}
	}
	e.Workers[killed].Kill()
	// Each replica counts its own passive failures, and picks the dead
	// worker only as often as its scores say: send until 20 requests in a
	// row succeed, with at most the threshold failing per replica.
	limit := 2 * e.Cfg.Health.PassiveFailureThreshold
	if shape.cluster == "override_host" {
		limit = 0 // the route retries on another host
	}
	failures, streak := 0, 0
	for i := 0; streak < 20; i++ {
		if i == 200 {
			t.Fatalf("no 20 successes in a row in 200 requests after %s died", killed)
		}
		status, worker, routed, out := e.gatewayPost("pool.test", eppChat)
		switch {
		case status == 200 && worker == killed:
			t.Fatalf("request %d served by the killed worker %s", i, killed)
		case status != 200:
			failures++
			streak = 0
			if failures > limit {
				t.Fatalf("%d requests failed after %s died, want at most %d: %s", failures, killed, limit, out)
			}
		case shape.cluster == "original_dst" && worker != routed:
			// Istio's config reports no served endpoint: a retry that
			// moved a request off the dead pick is invisible to the
			// router, which learns of the death from its active checks.
			t.Fatalf("request %d served by %q, routed %q", i, worker, routed)
		default:
			streak++
		}
	}
	t.Logf("killed worker %s: %d failed requests", killed, failures)

	// No picker answering: FailClose refuses with the ext_proc filter's
	// error status (500: the gateways set no status_on_error); FailOpen
	// serves where the gateway has a route without a destination.
	e.shutdownRouter()
	second.shutdownRouter()
	if status, worker, _, out := e.gatewayPost("pool.test", eppChat); status != 500 {
		t.Fatalf("fail-closed pool, no picker: status %d, served by %q: %s", status, worker, out)
	}
	status, worker, _, out := e.gatewayPost(failOpenHost, eppChat)
	switch {
	case duplex:
		// Envoy fails open under full duplex only before the first body
		// chunk reached the processor (docs/gateways.md): the filter's
		// error status.
		if status != 500 {
			t.Fatalf("fail-open pool, full duplex, no picker: status %d (%s); Envoy fails open here now: update docs/gateways.md", status, out)
		}
	case shape.cluster == "override_host":
		// No destination: the fallback policy serves.
		if status != 200 || worker == "" {
			t.Fatalf("fail-open pool, no picker: status %d: %s", status, out)
		}
	default:
		// An ORIGINAL_DST cluster has no endpoints of its own: without the
		// header there is nowhere to send the request.
		if status != 503 {
			t.Fatalf("fail-open ORIGINAL_DST pool, no picker: status %d (%s), want 503", status, out)
		}
	}
}

// gatewayStream sends a streamed request and counts the SSE events that
// arrive, through the final [DONE].
func (e *env) gatewayStream(body string) (status, events int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
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
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") {
			events++
			done = done || strings.TrimSpace(line) == "data: [DONE]"
		}
	}
	if resp.StatusCode == 200 && !done {
		e.t.Fatalf("stream ended without [DONE] after %d events", events)
	}
	return resp.StatusCode, events
}

// Why the default is one endpoint: with fallbacks, the destination is a
// list, which an ORIGINAL_DST cluster cannot parse. Every request fails;
// the day Envoy parses lists there, this fails and docs/gateways.md
// should say so.
func TestGatewayOriginalDstRoutesNothingOnAList(t *testing.T) {
	e, _ := startGateway(t, gatewayShapes[0], true, func(c *config.Config) { c.Envoy.Fallbacks = 2 })
	for i := range 3 {
		if status, worker, _, out := e.gatewayPost("pool.test", eppChat); status != 503 || worker != "" {
			t.Fatalf("request %d with a destination list: status %d, served by %q (%s); ORIGINAL_DST parses lists now: update docs/gateways.md", i, status, worker, out)
		}
	}
}
