package envoy

import (
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/config"
)

func TestRenderEndpointPicker(t *testing.T) {
	cfg := config.Default()
	cfg.Envoy.Mode = config.ModeEndpointPicker
	cfg.TLS.ExtProc = true
	cfg.Envoy.ExtProcCAFile = "/etc/router/ca.crt"
	cfg.Workers = []config.Worker{
		{ID: "a", Address: "10.0.0.1:8000", Models: []string{"m"}, MaxConcurrency: 1},
		{ID: "b", Address: "10.0.0.2:8000", Models: []string{"m"}, MaxConcurrency: 1},
	}
	out, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := string(out)
	for _, want := range []string{
		"request_body_mode: BUFFERED",
		"allow_mode_override: true",
		"name: envoy.load_balancing_policies.override_host",
		"- metadata: { key: envoy.lb, path: [{ key: x-gateway-destination-endpoint }] }",
		"selected_host_key: { key: envoy.lb, path: [{ key: x-gateway-destination-endpoint-served }] }",
		"forwarding_namespaces: { untyped: [envoy.lb.subset_hint, envoy.lb] }",
		"address: 10.0.0.2, port_value: 8000",
		"name: envoy.transport_sockets.tls",
		`trusted_ca: { filename: "/etc/router/ca.crt" }`,
	} {
		if !strings.Contains(y, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	if strings.Contains(y, "x-llm-cluster") {
		t.Error("endpoint-picker config routes by x-llm-cluster")
	}

	// The protocol names endpoints by ip:port.
	cfg.Workers[1].Address = "gpu-b.internal:8000"
	if _, err := Render(cfg); err == nil || !strings.Contains(err.Error(), "ip:port") {
		t.Fatalf("host name in endpoint-picker mode: %v", err)
	}
}

// The cluster-header rendering speaks TLS to the router too, and not
// without tls.extproc.
func TestRenderTLSToTheRouter(t *testing.T) {
	cfg := config.Default()
	cfg.Workers = []config.Worker{{ID: "a", Address: "10.0.0.1:8000", Models: []string{"m"}, MaxConcurrency: 1}}
	plain, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS.ExtProc = true
	secure, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "transport_sockets.tls") || !strings.Contains(string(secure), "transport_sockets.tls") {
		t.Fatal("TLS to the router follows tls.extproc")
	}
	if strings.Contains(string(secure), "trusted_ca") {
		t.Fatal("no CA configured, yet the rendering verifies")
	}
}
