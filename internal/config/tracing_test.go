package config

import (
	"strings"
	"testing"
	"time"
)

func TestTracingIsOffByDefault(t *testing.T) {
	cfg, err := Parse(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Enabled || tr.Protocol != TracingGRPC || tr.SampleRatio != 1 || !tr.ParentBased || tr.ServiceName != "llm-router" {
		t.Fatalf("defaults: %+v", tr)
	}
	if got := tr.EndpointURL(); got != "http://127.0.0.1:4317" {
		t.Errorf("grpc default endpoint %q", got)
	}
	tr.Protocol = TracingHTTP
	if got := tr.EndpointURL(); got != "http://127.0.0.1:4318/v1/traces" {
		t.Errorf("http default endpoint %q", got)
	}
}

func TestTracingConfigLoads(t *testing.T) {
	cfg, err := Parse([]byte("tracing:\n  enabled: true\n  protocol: http\n  endpoint: https://otel.example:4318/custom/traces\n  sample_ratio: 0.25\n  parent_based: false\n  export_timeout: 3s\n"),
		envOf(map[string]string{"TRACING_SERVICE_NAME": "router-eu"}))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if !tr.Enabled || tr.Protocol != TracingHTTP || tr.EndpointURL() != "https://otel.example:4318/custom/traces" ||
		tr.SampleRatio != 0.25 || tr.ParentBased || tr.ServiceName != "router-eu" || tr.ExportTimeout.D() != 3*time.Second {
		t.Fatalf("loaded %+v", tr)
	}
}

func TestBadTracingConfigNamesTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown protocol", "tracing:\n  protocol: thrift\n", `tracing.protocol: want grpc or http, got "thrift"`},
		{"no scheme", "tracing:\n  endpoint: 127.0.0.1:4317\n", "tracing.endpoint: want http://host:port"},
		{"other scheme", "tracing:\n  endpoint: udp://127.0.0.1:4317\n", "tracing.endpoint: want http://host:port"},
		{"no port", "tracing:\n  endpoint: http://collector\n", "tracing.endpoint: want a port"},
		{"grpc with a path", "tracing:\n  endpoint: http://127.0.0.1:4317/v1/traces\n", "tracing.endpoint: grpc takes no path"},
		{"credentials in the URL", "tracing:\n  protocol: http\n  endpoint: https://u:p@otel:4318/v1/traces\n", "tracing.endpoint: want no query, fragment or credentials"},
		{"ratio above 1", "tracing:\n  sample_ratio: 1.5\n", "tracing.sample_ratio: must be in [0, 1]"},
		{"negative ratio", "tracing:\n  sample_ratio: -0.1\n", "tracing.sample_ratio: must be in [0, 1]"},
		{"no service name", "tracing:\n  service_name: ''\n", "tracing.service_name: must not be empty"},
		{"zero timeout", "tracing:\n  export_timeout: 0s\n", "tracing.export_timeout: must be above 0"},
		{"unknown key", "tracing:\n  sampler: always_on\n", "unknown key sampler"},
		{"checked while off", "tracing:\n  enabled: false\n  protocol: zipkin\n", "tracing.protocol"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
