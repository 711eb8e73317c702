package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

var (
	collectorOnce sync.Once
	collectorBin  string
	collectorErr  error
)

// startCollector starts a real OpenTelemetry Collector (test/otelcol,
// built on first use) on free loopback ports.
func startCollector(t *testing.T) *stack.Collector {
	t.Helper()
	collectorOnce.Do(func() {
		collectorBin, collectorErr = stack.CollectorBinary(filepath.Dir(bins["llm-router"]))
	})
	if collectorErr != nil {
		t.Fatal(collectorErr)
	}
	c, err := stack.StartCollector(t.Context(), collectorBin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop(3 * time.Second)
		if t.Failed() {
			t.Logf("otelcol log tail:\n%s", tailString(c.Log(), 3000))
		}
	})
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// traceparentOf splits a W3C traceparent into its trace and span ids.
func traceparentOf(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 {
		t.Fatalf("not a traceparent: %q", tp)
	}
	return parts[1], parts[2]
}

// A request with the client's traceparent, through real Envoy to a gpusim
// worker, with the router exporting to a real collector over OTLP (gRPC,
// then HTTP): the collector holds the router's spans in the client's
// trace, the request span a child of the client's span and the others
// below it; the worker was sent a traceparent of the same trace, whose
// parent is the router's request span. A malformed traceparent gets a
// 200 and a trace of its own.
func TestTracedRequestEndToEnd(t *testing.T) {
	col := startCollector(t)
	for _, protocol := range []string{config.TracingGRPC, config.TracingHTTP} {
		t.Run(protocol, func(t *testing.T) {
			service := "llm-router-e2e-" + protocol
			e := newEnv(t, []workerSpec{{ID: "gpu-0", Model: "m"}, {ID: "gpu-1", Model: "m"}}, func(c *config.Config) {
				c.Tracing.Enabled, c.Tracing.Protocol, c.Tracing.ServiceName = true, protocol, service
				c.Tracing.Endpoint = "http://" + col.GRPCAddr
				if protocol == config.TracingHTTP {
					c.Tracing.Endpoint = "http://" + col.HTTPAddr + "/v1/traces"
				}
			})
			clientTrace, clientSpan := randomHex(16), randomHex(8)
			const body = `{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":8,"stream":true}`
			resp, out := e.post("/v1/chat/completions", body, map[string]string{"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01"})
			if resp.StatusCode != 200 || !strings.Contains(out, "[DONE]") {
				t.Fatalf("traced request: %d %s", resp.StatusCode, out)
			}
			worker := resp.Header.Get("x-routed-node")
			workerTrace, workerParent := traceparentOf(t, resp.Header.Get("x-gpusim-traceparent"))
			if workerTrace != clientTrace || workerParent == clientSpan {
				t.Fatalf("worker got trace %s parent %s; want the client's trace %s under a router span", workerTrace, workerParent, clientTrace)
			}

			resp, out = e.post("/v1/chat/completions", body, map[string]string{"traceparent": "00-not-a-trace-01"})
			if resp.StatusCode != 200 {
				t.Fatalf("malformed traceparent: %d %s", resp.StatusCode, out)
			}
			newTrace, _ := traceparentOf(t, resp.Header.Get("x-gpusim-traceparent"))
			if newTrace == clientTrace {
				t.Fatal("a malformed traceparent joined the earlier trace")
			}

			// Stopping the router exports what it has batched.
			e.shutdownRouter()
			var spans []stack.Span
			err := stack.WaitFor(t.Context(), 20*time.Second, func() error {
				all, err := col.Spans()
				if err != nil {
					return err
				}
				spans = spans[:0]
				for _, s := range all {
					if s.Service == service {
						spans = append(spans, s)
					}
				}
				if n := len(spans); n < 10 {
					return fmt.Errorf("%d spans of %s in the collector", n, service)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			traced := byName(spans, clientTrace)
			for _, name := range []string{"llm_router.request", "llm_router.decide", "llm_router.claim", "llm_router.response", "llm_router.release"} {
				if len(traced[name]) != 1 {
					t.Fatalf("%d %s spans in the client's trace, want 1; spans: %v", len(traced[name]), name, names(spans))
				}
			}
			req := traced["llm_router.request"][0]
			if req.ParentSpanID != clientSpan || req.Kind != 2 {
				t.Errorf("request span's parent %s kind %d, want the client's span %s, server", req.ParentSpanID, req.Kind, clientSpan)
			}
			if req.SpanID != workerParent {
				t.Errorf("the worker's parent span %s is not the router's request span %s", workerParent, req.SpanID)
			}
			for _, name := range []string{"llm_router.decide", "llm_router.response", "llm_router.release"} {
				if p := traced[name][0].ParentSpanID; p != req.SpanID {
					t.Errorf("%s's parent %s, want the request span %s", name, p, req.SpanID)
				}
			}
			decide := traced["llm_router.decide"][0]
			if p := traced["llm_router.claim"][0].ParentSpanID; p != decide.SpanID {
				t.Errorf("claim's parent %s, want the decide span %s", p, decide.SpanID)
			}
			wantAttrs(t, "request", req.Attributes, map[string]any{
				"gen_ai.request.model": "m", "gen_ai.request.max_tokens": int64(8), "gen_ai.operation.name": "chat",
				"gen_ai.usage.output_tokens": int64(8), "http.response.status_code": int64(200), "llm_router.response.worker": worker,
			})
			if n, _ := req.Attributes["gen_ai.usage.input_tokens"].(int64); n <= 0 {
				t.Errorf("gen_ai.usage.input_tokens = %v, want the worker's count", req.Attributes["gen_ai.usage.input_tokens"])
			}
			wantAttrs(t, "decide", decide.Attributes, map[string]any{
				"llm_router.decision.worker": worker, "llm_router.decision.outcome": "claimed", "gen_ai.request.model": "m",
			})
			cands, _ := decide.Attributes["llm_router.candidates.worker"].([]any)
			scores, _ := decide.Attributes["llm_router.candidates.score"].([]any)
			if len(cands) != 2 || len(scores) != 2 || !slices.Contains(cands, any("gpu-0")) || !slices.Contains(cands, any("gpu-1")) {
				t.Errorf("candidates %v scores %v, want both workers scored", cands, scores)
			}

			fresh := byName(spans, newTrace)["llm_router.request"]
			if len(fresh) != 1 || fresh[0].ParentSpanID != "" {
				t.Errorf("malformed traceparent: request spans in the new trace %+v, want one root", fresh)
			}
		})
	}
}

// byName groups the spans of one trace by name.
func byName(spans []stack.Span, traceID string) map[string][]stack.Span {
	out := map[string][]stack.Span{}
	for _, s := range spans {
		if s.TraceID == traceID {
			out[s.Name] = append(out[s.Name], s)
		}
	}
	return out
}

func names(spans []stack.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name + "@" + s.TraceID[:8]
	}
	return out
}

func wantAttrs(t *testing.T, span string, got, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s span: %s = %v (%T), want %v", span, k, got[k], got[k], v)
		}
	}
}
