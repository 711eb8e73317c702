package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
)

func TestOffMakesNoProvider(t *testing.T) {
	p, err := New(context.Background(), config.Default().Tracing, "r", zap.NewNop())
	if err != nil || p != nil {
		t.Fatalf("tracing off: %v, %v", p, err)
	}
	if p.Tracer() != nil || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider must give no tracer and shut down quietly")
	}
}

func TestSampler(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	parent := func(sampled bool) trace.SpanContext {
		var flags trace.TraceFlags
		if sampled {
			flags = trace.FlagsSampled
		}
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true})
	}
	tests := []struct {
		name        string
		ratio       float64
		parentBased bool
		parent      *trace.SpanContext
		want        bool
	}{
		{"new trace, ratio 1", 1, true, nil, true},
		{"new trace, ratio 0", 0, true, nil, false},
		{"sampled parent, ratio 0, parent-based", 0, true, ptr(parent(true)), true},
		{"unsampled parent, ratio 1, parent-based", 1, true, ptr(parent(false)), false},
		{"sampled parent, ratio 0, by ratio only", 0, false, ptr(parent(true)), false},
		{"unsampled parent, ratio 1, by ratio only", 1, false, ptr(parent(false)), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default().Tracing
			c.SampleRatio, c.ParentBased = tc.ratio, tc.parentBased
			ctx := context.Background()
			if tc.parent != nil {
				ctx = trace.ContextWithRemoteSpanContext(ctx, *tc.parent)
			}
			res := Sampler(c).ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: traceID, Name: "s"})
			if got := res.Decision == sdktrace.RecordAndSample; got != tc.want {
				t.Fatalf("sampled %v, want %v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Over HTTP the spans reach the configured path as OTLP protobuf, and
// Shutdown sends what is batched.
func TestHTTPExportReachesThePath(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path+" "+r.Header.Get("Content-Type"))
		if len(b) > 0 {
			bodies++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	c := config.Default().Tracing
	c.Enabled, c.Protocol, c.Endpoint = true, config.TracingHTTP, srv.URL+"/otlp/v1/traces"
	c.ExportTimeout = config.Duration(5 * time.Second)
	p, err := New(context.Background(), c, "replica-1", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "s")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "/otlp/v1/traces application/x-protobuf" || bodies != 1 {
		t.Fatalf("exports %v (%d with a body), want one to /otlp/v1/traces", paths, bodies)
	}
}
