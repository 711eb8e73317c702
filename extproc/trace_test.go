package extproc

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llm-router/llm-router/scheduler"
)

// spanScheduler is a fakeScheduler that keeps the span context Admit
// was called in.
type spanScheduler struct {
	*fakeScheduler
	mu  sync.Mutex
	got trace.SpanContext
}

func (s *spanScheduler) Admit(ctx context.Context, r scheduler.Request) (Claim, error) {
	s.mu.Lock()
	s.got = trace.SpanContextFromContext(ctx)
	s.mu.Unlock()
	return s.fakeScheduler.Admit(ctx, r)
}

// runTraced is run with a tracer whose spans the returned recorder keeps.
func runTraced(t *testing.T, sched Scheduler, traced bool) (*fakeStream, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	opts := Options{MaxBodyBytes: 1 << 20}
	if traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		opts.Tracer = tp.Tracer("test")
	}
	st := newFakeStream(context.Background())
	srv := New(sched, opts)
	go func() {
		_ = srv.Process(st)
		close(st.done)
	}()
	return st, rec
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no %s span ended", name)
	return nil
}

const clientTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A client's traceparent: the request span continues its trace, the
// decision runs in the request span, and the worker is sent the request
// span's traceparent (the client's tracestate kept).
func TestTraceparentIsContinuedAndPassedToTheWorker(t *testing.T) {
	sched := &spanScheduler{fakeScheduler: &fakeScheduler{worker: "w1"}}
	st, rec := runTraced(t, sched, true)
	r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions",
		headerTraceparent, clientTraceparent, headerTracestate, "vendor=1"))
	up := setHeaders(r.GetRequestHeaders().GetResponse().GetHeaderMutation())
	st.roundTrip(t, reqBody(`{"model":"m","messages":[],"max_tokens":9,"stream":true}`))
	st.roundTrip(t, respHeaders(":status", "200", "content-type", "text/event-stream"))
	st.roundTrip(t, respBody("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", false))
	st.roundTrip(t, respBody("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n", true))
	close(st.in)
	<-st.done

	req := endedSpan(t, rec, SpanRequest)
	if got := req.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("request span's trace %s, want the client's", got)
	}
	if req.Parent().SpanID().String() != "00f067aa0ba902b7" || !req.Parent().IsRemote() || req.SpanKind() != trace.SpanKindServer {
		t.Fatalf("request span's parent %v kind %v, want the client's span", req.Parent(), req.SpanKind())
	}
	if sched.got.SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("Admit ran in span %s, want the request span %s", sched.got.SpanID(), req.SpanContext().SpanID())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + req.SpanContext().SpanID().String() + "-01"
	if up[headerTraceparent] != want || up[headerTracestate] != "vendor=1" {
		t.Fatalf("worker gets traceparent %q tracestate %q, want %q and vendor=1", up[headerTraceparent], up[headerTracestate], want)
	}
	a := spanAttrs(req)
	if a["gen_ai.request.model"].AsString() != "m" || a["gen_ai.request.max_tokens"].AsInt64() != 9 || a["gen_ai.operation.name"].AsString() != "chat" ||
		a["gen_ai.usage.input_tokens"].AsInt64() != 12 || a["gen_ai.usage.output_tokens"].AsInt64() != 4 ||
		a["http.response.status_code"].AsInt64() != 200 || a[AttrServedBy].AsString() != "w1" {
		t.Fatalf("request span attributes: %v", a)
	}
	resp := endedSpan(t, rec, SpanResponse)
	if resp.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Fatal("the response span is not the request span's child")
	}
	if ev := resp.Events(); len(ev) != 1 || ev[0].Name != eventFirstTok {
		t.Fatalf("response events %v, want one first_token", ev)
	}
}

// A malformed traceparent is never an error: the request goes on, in a
// trace of its own, and the worker gets a valid traceparent of it.
func TestMalformedTraceparentStartsANewTrace(t *testing.T) {
	for _, bad := range []string{
		"garbage",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // all-zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // all-zero span id
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff is invalid
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // no flags
		strings.Repeat("0", 600),
	} {
		t.Run(bad[:min(len(bad), 24)], func(t *testing.T) {
			sched := &spanScheduler{fakeScheduler: &fakeScheduler{worker: "w1"}}
			st, rec := runTraced(t, sched, true)
			r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions", headerTraceparent, bad, headerTracestate, "vendor=1"))
			if r.GetImmediateResponse() != nil {
				t.Fatalf("refused: %v", r.GetImmediateResponse())
			}
			mut := r.GetRequestHeaders().GetResponse().GetHeaderMutation()
			r = st.roundTrip(t, reqBody(`{"model":"m","prompt":"x"}`))
			if setHeaders(r.GetRequestBody().GetResponse().GetHeaderMutation())[headerCluster] != "w1" {
				t.Fatalf("not routed: %v", r)
			}
			st.roundTrip(t, respHeaders(":status", "200", "content-type", "application/json"))
			close(st.in)
			<-st.done
			req := endedSpan(t, rec, SpanRequest)
			if req.Parent().IsValid() || req.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Fatalf("request span continued a malformed parent: %v", req.Parent())
			}
			sc, err := trace.TraceIDFromHex(strings.Split(setHeaders(mut)[headerTraceparent], "-")[1])
			if err != nil || sc != req.SpanContext().TraceID() {
				t.Fatalf("worker gets traceparent %q, want the new trace %s", setHeaders(mut)[headerTraceparent], req.SpanContext().TraceID())
			}
			if rm := mut.GetRemoveHeaders(); !strings.Contains(strings.Join(rm, ","), headerTracestate) {
				t.Fatalf("the client's tracestate of another trace reaches the worker: removed %v", rm)
			}
		})
	}
}

// With tracing off nothing is added: the client's headers reach the
// worker as sent.
func TestNoTracerLeavesTraceHeadersAlone(t *testing.T) {
	sched := &spanScheduler{fakeScheduler: &fakeScheduler{worker: "w1"}}
	st, rec := runTraced(t, sched, false)
	r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions", headerTraceparent, clientTraceparent))
	mut := r.GetRequestHeaders().GetResponse().GetHeaderMutation()
	if _, ok := setHeaders(mut)[headerTraceparent]; ok || strings.Contains(strings.Join(mut.GetRemoveHeaders(), ","), "trace") {
		t.Fatalf("trace headers changed with tracing off: %v", mut)
	}
	st.roundTrip(t, reqBody(`{"model":"m","prompt":"x"}`))
	close(st.in)
	<-st.done
	if sched.got.IsValid() || len(rec.Ended()) != 0 {
		t.Fatalf("spans with tracing off: admit in %v, %d ended", sched.got, len(rec.Ended()))
	}
}

// A request the router refuses is traced with its status and error code.
func TestRefusalIsOnTheRequestSpan(t *testing.T) {
	sched := &spanScheduler{fakeScheduler: &fakeScheduler{err: scheduler.ErrQueueFull}}
	st, rec := runTraced(t, sched, true)
	st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions"))
	r := st.roundTrip(t, reqBody(`{"model":"m","prompt":"x"}`))
	if r.GetImmediateResponse() == nil {
		t.Fatal("not refused")
	}
	close(st.in)
	<-st.done
	a := spanAttrs(endedSpan(t, rec, SpanRequest))
	if a["http.response.status_code"].AsInt64() != 429 || a["error.type"].AsString() != "queue_full" {
		t.Fatalf("refusal attributes: %v", a)
	}
}

// FuzzTraceparent: whatever the client sends as traceparent and
// tracestate, the worker gets a valid traceparent of the request span's
// trace, which continues the client's only when its traceparent was
// valid.
func FuzzTraceparent(f *testing.F) {
	f.Add(clientTraceparent, "vendor=1")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "a=b,c=d")
	f.Add("garbage", "=,=")
	tp := sdktrace.NewTracerProvider()
	tracer := tp.Tracer("fuzz")
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		var rt requestTrace
		rt.client.read(headerTraceparent, traceparent)
		rt.client.read(headerTracestate, tracestate)
		rt.start(context.Background(), tracer, "POST", "/v1/completions", "id")
		defer rt.end()
		set, _ := rt.upstreamHeaders()
		var got traceCarrier
		for _, h := range set {
			got.Set(h.Header.Key, string(h.Header.RawValue))
		}
		sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), &got))
		if !sc.IsValid() || sc.TraceID() != rt.request.SpanContext().TraceID() || sc.SpanID() != rt.request.SpanContext().SpanID() {
			t.Fatalf("worker traceparent %q is not the request span's %v", got.traceparent, rt.request.SpanContext())
		}
		client := trace.SpanContextFromContext(traceContext.Extract(context.Background(), &rt.client))
		if client.IsValid() != (sc.TraceID() == client.TraceID()) {
			t.Fatalf("client %q valid %v, continued %v", traceparent, client.IsValid(), sc.TraceID() == client.TraceID())
		}
	})
}

// An unsampled request (the client's flag 00, parent-based) still passes
// its trace, flag 00, to the worker, and records nothing.
func TestUnsampledRequestPassesItsTraceOn(t *testing.T) {
	sched := &spanScheduler{fakeScheduler: &fakeScheduler{worker: "w1"}}
	st, rec := runTraced(t, sched, true)
	r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions",
		headerTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
	up := setHeaders(r.GetRequestHeaders().GetResponse().GetHeaderMutation())[headerTraceparent]
	st.roundTrip(t, reqBody(`{"model":"m","prompt":"x"}`))
	st.roundTrip(t, respHeaders(":status", "200", "content-type", "application/json"))
	close(st.in)
	<-st.done
	if !strings.HasPrefix(up, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(up, "-00") || strings.Contains(up, "00f067aa0ba902b7") {
		t.Fatalf("worker gets %q, want the client's trace, a span of the router's, flag 00", up)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans recorded for an unsampled request", n)
	}
}
