package extproc

import (
	"context"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context headers (https://www.w3.org/TR/trace-context/).
const (
	headerTraceparent = "traceparent"
	headerTracestate  = "tracestate"
)

// The adapter's spans: the request (the ext_proc stream, from its request
// headers to its end) and the response (from the response headers to the
// release). The scheduler's spans (decide, claim, queue, release) are
// children of the request span.
const (
	SpanRequest  = "llm_router.request"
	SpanResponse = "llm_router.response"
)

// Attribute keys of the adapter's own, beside the semantic conventions'.
const (
	AttrRequestID = attribute.Key("llm_router.request.id")
	AttrServedBy  = attribute.Key("llm_router.response.worker")
	AttrTTFT      = attribute.Key("llm_router.response.ttft_seconds")
	AttrAborted   = attribute.Key("llm_router.response.aborted")
	eventFirstTok = "first_token"
)

// traceContext reads and writes the W3C headers. A malformed or missing
// traceparent extracts nothing: the request span then starts a new trace.
var traceContext propagation.TraceContext

// traceCarrier holds one request's trace context headers, as read from
// the client or as written for the worker.
type traceCarrier struct{ traceparent, tracestate string }

var _ propagation.TextMapCarrier = (*traceCarrier)(nil)

func (c *traceCarrier) Get(key string) string {
	switch key {
	case headerTraceparent:
		return c.traceparent
	case headerTracestate:
		return c.tracestate
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case headerTraceparent:
		c.traceparent = value
	case headerTracestate:
		c.tracestate = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{headerTraceparent, headerTracestate} }

// read takes key's value if it is a trace context header.
func (c *traceCarrier) read(key, value string) bool {
	if key != headerTraceparent && key != headerTracestate {
		return false
	}
	c.Set(key, value)
	return true
}

// requestTrace is one request's spans. With tracing off (no tracer) every
// method does nothing and the client's headers pass to the worker as sent.
type requestTrace struct {
	client   traceCarrier // as the client sent them
	request  trace.Span   // nil: tracing off
	response trace.Span
}

// start begins the request span, continuing the client's trace when its
// traceparent is valid, and returns the context the decision runs in.
func (rt *requestTrace) start(ctx context.Context, tracer trace.Tracer, method, path, requestID string) context.Context {
	if tracer == nil {
		return ctx
	}
	ctx, rt.request = tracer.Start(traceContext.Extract(ctx, &rt.client), SpanRequest,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(path), AttrRequestID.String(requestID)))
	return ctx
}

// upstreamHeaders are the trace context headers the worker gets: the
// request span's, in place of the client's (a malformed one included).
// It also names a client tracestate to remove when the span has none.
func (rt *requestTrace) upstreamHeaders() (set []*corev3.HeaderValueOption, remove []string) {
	if rt.request == nil {
		return nil, nil
	}
	var out traceCarrier
	traceContext.Inject(trace.ContextWithSpan(context.Background(), rt.request), &out)
	if out.traceparent != "" {
		set = append(set, setHeader(headerTraceparent, out.traceparent))
	}
	switch {
	case out.tracestate != "":
		set = append(set, setHeader(headerTracestate, out.tracestate))
	case rt.client.tracestate != "":
		remove = append(remove, headerTracestate)
	}
	return set, remove
}

// requested records what the body asked for.
func (rt *requestTrace) requested(e Endpoint, b Body) {
	if rt.request == nil || !rt.request.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{semconv.GenAIRequestModel(b.Model)}
	if op, ok := operationOf(e); ok {
		attrs = append(attrs, op)
	}
	if b.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(b.MaxTokens))
	}
	rt.request.SetAttributes(attrs...)
}

func operationOf(e Endpoint) (attribute.KeyValue, bool) {
	switch e {
	case EndpointChat:
		return semconv.GenAIOperationNameChat, true
	case EndpointCompletions, EndpointLlamaCompletion:
		return semconv.GenAIOperationNameTextCompletion, true
	case EndpointEmbeddings:
		return semconv.GenAIOperationNameEmbeddings, true
	}
	return attribute.KeyValue{}, false
}

// refused records the error reply the router sent instead of a worker.
func (rt *requestTrace) refused(e httpError) {
	if rt.request == nil || !rt.request.IsRecording() {
		return
	}
	rt.request.SetAttributes(semconv.HTTPResponseStatusCode(e.Status), semconv.ErrorTypeKey.String(e.Code))
	if e.Status >= 500 {
		rt.request.SetStatus(codes.Error, e.Message)
	}
}

// responded begins the response span when the worker's (or Envoy's)
// response headers arrive.
func (rt *requestTrace) responded(ctx context.Context, tracer trace.Tracer, status int, worker string) {
	if rt.request == nil || !rt.request.IsRecording() {
		return // off, or not sampled: neither is a child of it
	}
	_, rt.response = tracer.Start(ctx, SpanResponse,
		trace.WithAttributes(semconv.HTTPResponseStatusCode(status), AttrServedBy.String(worker)))
}

// firstToken marks the first content token on the response span.
func (rt *requestTrace) firstToken(ttft time.Duration) {
	if rt.response != nil {
		rt.response.AddEvent(eventFirstTok, trace.WithAttributes(AttrTTFT.Float64(ttft.Seconds())))
	}
}

// usage is what the response told of the tokens: completion tokens (the
// worker's usage or the counted deltas) and prompt tokens (the worker's
// usage only; 0: not told).
type usage struct{ input, output int }

// finished ends the response span with how the response went, and puts
// the served worker and the token usage on the request span.
func (rt *requestTrace) finished(status int, worker string, ttft time.Duration, u usage, aborted bool) {
	if rt.request == nil || !rt.request.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{semconv.HTTPResponseStatusCode(status), AttrServedBy.String(worker)}
	if u.output > 0 {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(u.output))
	}
	if u.input > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(u.input))
	}
	rt.request.SetAttributes(attrs...)
	if status >= 500 {
		rt.request.SetStatus(codes.Error, "upstream status "+strconv.Itoa(status))
	}
	if rt.response == nil {
		return
	}
	rt.response.SetAttributes(AttrServedBy.String(worker), AttrAborted.Bool(aborted))
	if ttft > 0 {
		rt.response.SetAttributes(AttrTTFT.Float64(ttft.Seconds()))
	}
	rt.response.End()
	rt.response = nil
}

// end ends the request span, when the ext_proc stream ends.
func (rt *requestTrace) end() {
	if rt.response != nil {
		rt.response.End()
	}
	if rt.request != nil {
		rt.request.End()
	}
}
