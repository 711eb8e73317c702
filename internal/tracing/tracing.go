// Package tracing sets up OpenTelemetry tracing for a router process from
// the config's tracing block: the SDK's tracer provider, its sampler, and
// the OTLP exporter over gRPC or HTTP. The packages that make spans
// (extproc, the scheduler) use only the OpenTelemetry API and get their
// tracer from here through internal/app; with tracing off they get none.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
)

// scope is the instrumentation scope of every span the router makes.
const scope = "github.com/llm-router/llm-router"

// Provider is a process's tracer provider and its exporter.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New builds the provider for c, or returns nil when tracing is off. It
// does not wait for the collector: spans are batched and exported in the
// background, and those that cannot be delivered are dropped. Export
// failures are logged to log (OpenTelemetry's error handler is one per
// process: the last provider built sets it).
func New(ctx context.Context, c config.Tracing, replica string, log *zap.Logger) (*Provider, error) {
	if !c.Enabled {
		return nil, nil
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", zap.Error(err))
	}))
	exp, err := newExporter(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res := resource.NewSchemaless(
		semconv.ServiceName(c.ServiceName),
		semconv.ServiceInstanceID(replica),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(Sampler(c)),
		sdktrace.WithResource(res),
	)
	return &Provider{tp: tp}, nil
}

// Sampler is c's sampler: a share of new traces by trace id (so every
// replica and every span of a trace agree), and, when parent-based, the
// sampled flag of the client's trace context where there is one.
func Sampler(c config.Tracing) sdktrace.Sampler {
	ratio := sdktrace.TraceIDRatioBased(c.SampleRatio)
	if !c.ParentBased {
		return ratio
	}
	return sdktrace.ParentBased(ratio)
}

func newExporter(ctx context.Context, c config.Tracing) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(c.EndpointURL())
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	insecure := u.Scheme == "http"
	switch c.Protocol {
	case config.TracingGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithTimeout(c.ExportTimeout.D())}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	case config.TracingHTTP:
		path := u.Path
		if path == "" || path == "/" {
			path = "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path), otlptracehttp.WithTimeout(c.ExportTimeout.D())}
		if insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("protocol %q: want grpc or http", c.Protocol)
}

// Tracer is the router's tracer; nil on a nil provider (tracing off), so
// that the packages making spans make none.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(scope)
}

// Shutdown exports the spans still batched, within ctx, and stops the
// exporter. Safe on a nil provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}
