package config

import (
	"net/url"
	"time"
)

// Tracing configures OpenTelemetry tracing of each request: the router's
// spans, exported over OTLP, and the W3C traceparent it passes to the
// worker. Off by default.
type Tracing struct {
	Enabled bool `yaml:"enabled"`
	// Protocol is the OTLP transport: grpc or http (protobuf over HTTP).
	Protocol string `yaml:"protocol"`
	// Endpoint is the collector's URL: http:// for plaintext, https://
	// for TLS. With protocol http its path is the traces path (none:
	// /v1/traces); with grpc it has none. Empty: the protocol's local
	// default (http://127.0.0.1:4317, http://127.0.0.1:4318/v1/traces).
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded, in [0, 1].
	SampleRatio float64 `yaml:"sample_ratio"`
	// ParentBased follows the client's sampling decision when its
	// traceparent carries one; SampleRatio then applies to requests that
	// arrive without a (valid) traceparent only.
	ParentBased bool `yaml:"parent_based"`
	// ServiceName is the service.name of the router's spans.
	ServiceName string `yaml:"service_name"`
	// ExportTimeout bounds one export to the collector.
	ExportTimeout Duration `yaml:"export_timeout"`
}

// Tracing protocols.
const (
	TracingGRPC = "grpc"
	TracingHTTP = "http"
)

func defaultTracing() Tracing {
	return Tracing{
		Protocol:      TracingGRPC,
		SampleRatio:   1,
		ParentBased:   true,
		ServiceName:   "llm-router",
		ExportTimeout: Duration(10 * time.Second),
	}
}

// EndpointURL is the collector's URL, the protocol's default when none is
// set.
func (t Tracing) EndpointURL() string {
	switch {
	case t.Endpoint != "":
		return t.Endpoint
	case t.Protocol == TracingHTTP:
		return "http://127.0.0.1:4318/v1/traces"
	}
	return "http://127.0.0.1:4317"
}

// tracingKeys are the tracing block's keys, for Keys.
func tracingKeys() []Key {
	return []Key{
		{Path: "tracing.enabled", Env: "TRACING_ENABLED", Default: "false", Doc: "OpenTelemetry spans of each request (the ext_proc stream, the decision with its queue wait, claim and every candidate's score, the response, the release), exported over OTLP; the client's W3C traceparent is continued and passed to the worker (docs/tracing.md)", apply: setBool(func(c *Config) *bool { return &c.Tracing.Enabled })},
		{Path: "tracing.protocol", Env: "TRACING_PROTOCOL", Default: TracingGRPC, Doc: "OTLP transport: grpc or http (protobuf over HTTP)", apply: setString(func(c *Config) *string { return &c.Tracing.Protocol })},
		{Path: "tracing.endpoint", Env: "TRACING_ENDPOINT", Default: "", Doc: "the collector's URL: http:// plaintext, https:// TLS; with http its path is the traces path (none: /v1/traces); empty: http://127.0.0.1:4317 (grpc) or http://127.0.0.1:4318/v1/traces (http). Export headers and CA: the exporter's own OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_CERTIFICATE", apply: setString(func(c *Config) *string { return &c.Tracing.Endpoint })},
		{Path: "tracing.sample_ratio", Env: "TRACING_SAMPLE_RATIO", Default: "1", Doc: "share of new traces recorded, 0 to 1 (by trace id, so every replica keeps or drops the same trace)", apply: setFloat(func(c *Config) *float64 { return &c.Tracing.SampleRatio })},
		{Path: "tracing.parent_based", Env: "TRACING_PARENT_BASED", Default: "true", Doc: "follow the sampled flag of the client's traceparent; sample_ratio then applies only to requests that start a trace", apply: setBool(func(c *Config) *bool { return &c.Tracing.ParentBased })},
		{Path: "tracing.service_name", Env: "TRACING_SERVICE_NAME", Default: "llm-router", Doc: "service.name of the router's spans (service.instance.id is replica_id)", apply: setString(func(c *Config) *string { return &c.Tracing.ServiceName })},
		{Path: "tracing.export_timeout", Env: "TRACING_EXPORT_TIMEOUT_SECONDS", Default: "10s", Doc: "bound on one export to the collector; spans that cannot be exported are dropped, never waited for by a request", apply: setDuration(func(c *Config) *Duration { return &c.Tracing.ExportTimeout })},
	}
}

// validate checks the block whether or not tracing is on, so that a typo
// fails at start rather than when someone turns tracing on.
func (t Tracing) validate(bad func(key, format string, args ...any)) {
	if t.Protocol != TracingGRPC && t.Protocol != TracingHTTP {
		bad("tracing.protocol", "want grpc or http, got %q", t.Protocol)
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			bad("tracing.endpoint", "want http://host:port or https://host:port, got %q", t.Endpoint)
		case u.Port() == "":
			bad("tracing.endpoint", "want a port in %q", t.Endpoint)
		case t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/":
			bad("tracing.endpoint", "grpc takes no path, got %q", u.Path)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad("tracing.endpoint", "want no query, fragment or credentials (headers go in OTEL_EXPORTER_OTLP_HEADERS), got %q", t.Endpoint)
		}
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		bad("tracing.sample_ratio", "must be in [0, 1], got %g", t.SampleRatio)
	}
	if t.ServiceName == "" {
		bad("tracing.service_name", "must not be empty")
	}
	if d := t.ExportTimeout.D(); d <= 0 || d > time.Minute {
		bad("tracing.export_timeout", "must be above 0 and at most 1m, got %s", t.ExportTimeout)
	}
}
