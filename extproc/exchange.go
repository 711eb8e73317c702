package extproc

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tidwall/sjson"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// exchange is the state of one HTTP request across its ext_proc phases. It
// lives exactly as long as the ext_proc stream; close releases the claim if
// no phase did.
type exchange struct {
	srv  *Server
	ctx  context.Context
	send func(*extprocv3.ProcessingResponse) error

	identity Identity
	priority state.Priority
	// tenant is whose fair share the request is served from; unverified:
	// named by a header no key vouches for (weight 1).
	tenant           string
	tenantUnverified bool
	fairness         fairnessHeader
	slo              SLOTargets // what the headers asked; resolved with the model

	requestID string
	method    string
	path      string
	endpoint  Endpoint
	body      Body

	claim     Claim
	claimedAt time.Time
	status    int
	upstream  bool // the response came from (or through) a worker
	stream    *streamObserver
	strip     *usageStripper // set when the router added include_usage

	llmd      llmdRequest // what llm-d's request headers asked
	sloAsked  sloHeaders  // the latency objective headers sent
	rewritten []byte      // the body with its model rewritten, when asked

	trace requestTrace // the request's spans; inert with tracing off

	epp    *eppExchange // set in endpoint-picker mode
	subset []string     // the endpoint-picker subset hint; nil: none
	served string       // the endpoint that served, as Envoy reported it
}

func newExchange(ctx context.Context, s *Server) *exchange {
	x := &exchange{srv: s, ctx: ctx}
	if s.opts.EndpointPicker {
		x.epp = &eppExchange{}
	}
	return x
}

func (x *exchange) handle(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if x.epp != nil {
		return x.handleEPP(req)
	}
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.requestHeaders(r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return x.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return x.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}

func (x *exchange) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	var authorization, priority string
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.Key {
		case ":method":
			x.method = headerValue(hv)
		case ":path":
			x.path = headerValue(hv)
		case headerRequestID:
			x.requestID = sanitizeRequestID(headerValue(hv))
		case headerAuth:
			authorization = headerValue(hv)
		case headerPriority:
			priority = headerValue(hv)
		default:
			v := headerValue(hv)
			if !x.trace.client.read(hv.Key, v) && !x.sloAsked.read(hv.Key, v) && !x.fairness.read(hv.Key, v) {
				x.llmd.read(hv.Key, v)
			}
		}
	}
	if x.requestID == "" {
		x.requestID = newRequestID()
	}
	x.ctx = x.trace.start(x.ctx, x.srv.opts.Tracer, x.method, x.path, x.requestID)
	if x.srv.draining.Load() {
		return x.fail(ErrUnavailable)
	}
	x.identity = Anonymous
	if a := x.srv.opts.Auth; a != nil {
		id, err := a.Authenticate(authorization)
		if err != nil {
			return x.fail(err)
		}
		x.identity = id
	}
	p, err := priorityOf(x.llmd.priority(priority, x.srv.opts.Objectives), x.identity)
	if err != nil {
		return x.fail(err)
	}
	x.priority = p
	var ignored bool
	if x.tenant, ignored, x.tenantUnverified, err = tenantOf(x.fairness, x.identity); err != nil {
		return x.fail(err)
	}
	if ignored && x.srv.opts.FairnessIDIgnored != nil {
		x.srv.opts.FairnessIDIgnored()
	}
	if x.slo, err = x.sloAsked.parse(); err != nil {
		return x.fail(err)
	}
	x.endpoint = endpointFor(x.path)
	switch {
	case x.endpoint == EndpointNone && pathIs(x.path, "/v1/models"):
		if x.method != "GET" {
			return x.fail(ErrMethod)
		}
		return x.listModels()
	case x.endpoint == EndpointNone:
		return x.fail(ErrNotFound)
	case x.method != "POST":
		return x.fail(ErrMethod)
	case h.EndOfStream:
		return x.fail(badParam("", "request body is empty; expected a JSON object"))
	}
	// Strip any routing header the client sent: only the body phase's
	// decision may choose the upstream. The tenant's key and the priority
	// header are the router's business, not the worker's.
	remove := []string{headerCluster, headerPriority, HeaderPrefiller, headerPrefillerURL}
	if !x.srv.opts.ForwardAuthorization {
		remove = append(remove, headerAuth)
	}
	// With tracing on the worker continues the router's trace, not the
	// client's headers as sent.
	traceSet, traceRemove := x.trace.upstreamHeaders()
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{
				RemoveHeaders: append(remove, traceRemove...),
				SetHeaders:    append([]*corev3.HeaderValueOption{setHeader(headerRequestID, x.requestID)}, traceSet...),
			},
		}},
	}}
}

func (x *exchange) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if reply, ok := x.admit(b.Body); !ok {
		return reply
	}
	// An adapter runs in its base model's cluster.
	cluster := x.srv.opts.ClusterFor(x.claim.Worker(), cmp.Or(x.claim.Model(), x.body.Model))
	common := &extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setHeader(headerCluster, cluster)},
		},
		ClearRouteCache: true,
	}
	x.addPrefiller(common.HeaderMutation)
	if withUsage := x.upstreamBody(b.Body); withUsage != nil {
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: withUsage}}
		// Envoy checks the declared length against the mutated body.
		common.HeaderMutation.SetHeaders = append(common.HeaderMutation.SetHeaders,
			setHeader("content-length", strconv.Itoa(len(withUsage))))
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}},
		// Tells Envoy's fail-open path this request was decided by the
		// router (a client cannot forge dynamic metadata).
		DynamicMetadata: decidedMetadata,
	}
}

// admit parses the whole request body and claims a worker for it. When it
// returns false the exchange is over: reply is the error to send, or nil
// when Envoy ended the stream while the request waited.
func (x *exchange) admit(raw []byte) (reply *extprocv3.ProcessingResponse, ok bool) {
	if int64(len(raw)) > x.srv.opts.MaxBodyBytes {
		return x.fail(ErrTooLarge), false
	}
	body, err := parseBody(x.endpoint, raw, x.defaultModel())
	if err != nil {
		return x.fail(err), false
	}
	if x.llmd.rewrite != "" {
		if x.rewritten, err = x.llmd.rewriteModel(raw); err != nil {
			return x.fail(badParam("model", "cannot rewrite the model named by "+headerRewrite)), false
		}
		body.Model = x.llmd.rewrite
	}
	body.Blocks = sessionBlocks(x.identity.Tenant, x.llmd.session, body.Blocks)
	x.body = body
	x.trace.requested(x.endpoint, body)
	claim, err := x.srv.sched.Admit(x.ctx, scheduler.Request{
		ID:           x.requestID,
		Model:        body.Model,
		PromptTokens: body.PromptTokens,
		Blocks:       body.Blocks,
		MaxTokens:    body.MaxTokens,
		Stream:       body.Stream,
		Priority:     x.priority,
		Tenant:       x.tenant,
		Unverified:   x.tenantUnverified,
		SLO:          x.srv.opts.SLO.resolve(x.slo, x.identity, body.Model, x.priority, x.llmd.objective),
		Subset:       x.subset,
		OnQueued:     x.extendTimeout,
	})
	if err != nil {
		if x.ctx.Err() != nil {
			return nil, false // Envoy ended the stream while the request waited
		}
		return x.fail(err), false
	}
	x.claim, x.claimedAt = claim, x.srv.now()
	return nil, true
}

// upstreamBody returns the request body the worker should receive when the
// router changes it (a rewritten model, usage asked for), else nil.
func (x *exchange) upstreamBody(raw []byte) []byte {
	if !x.srv.opts.RequestUsage || !x.body.Stream || x.body.IncludeUsage || (x.endpoint != EndpointChat && x.endpoint != EndpointCompletions) {
		return x.rewritten
	}
	if x.rewritten != nil {
		raw = x.rewritten
	}
	// Exact completion tokens come from the worker's usage chunk; without
	// it the router counts deltas, which engines may batch.
	withUsage, err := sjson.SetBytes(raw, "stream_options.include_usage", true)
	if err != nil {
		return x.rewritten
	}
	x.strip = &usageStripper{}
	return withUsage
}

func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	var upstream, upstreamHost, contentType, pdServed string
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.Key {
		case ":status":
			x.status, _ = strconv.Atoi(headerValue(hv))
		case headerPDServed:
			pdServed = headerValue(hv)
		case headerUpstream:
			upstream = headerValue(hv)
		case headerUpstreamHost:
			upstreamHost = headerValue(hv)
		case "content-type":
			contentType = headerValue(hv)
		}
	}
	mut := &extprocv3.HeaderMutation{
		RemoveHeaders: []string{headerUpstream, headerUpstreamHost},
		SetHeaders:    []*corev3.HeaderValueOption{setHeader(headerRequestID, x.requestID)},
	}
	resp := &extprocv3.ProcessingResponse{}
	if upstreamHost == "" {
		upstreamHost = x.served // the endpoint-picker protocol's report
	}
	x.upstream = upstream != "" || upstreamHost != ""
	if x.claim != nil {
		if actual := x.actualWorker(upstream, upstreamHost); actual != "" {
			x.claim.Moved(actual)
		}
		if x.upstream {
			x.prefillOver(pdServed)
		}
		mut.SetHeaders = append(mut.SetHeaders, setHeader(headerRoutedNode, x.claim.Worker()))
		x.trace.responded(x.ctx, x.srv.opts.Tracer, x.status, x.claim.Worker())
		switch {
		case h.EndOfStream:
			x.finish(false)
		case strings.HasPrefix(contentType, "text/event-stream") && x.status < 300:
			// Only streamed responses pay for body phases: they are how the
			// router sees tokens arrive and the stream end.
			x.stream = newStreamObserver(x.claimedAt)
			resp.ModeOverride = &extprocfilterv3.ProcessingMode{
				ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND,
				ResponseBodyMode:   extprocfilterv3.ProcessingMode_STREAMED,
			}
		default:
			// A non-streamed answer arrives in one piece after generation
			// ends: the worker is done when its headers come back.
			x.finish(false)
		}
	}
	resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut}},
	}
	return resp
}

func (x *exchange) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	resp := &extprocv3.BodyResponse{}
	if out, changed := x.passBody(b); changed {
		resp.Response = &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_Body{Body: out},
		}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: resp}}
}

// passBody observes one response body chunk on its way to the client and
// returns what the client should get instead when the router changes it.
func (x *exchange) passBody(b *extprocv3.HttpBody) (out []byte, changed bool) {
	if x.stream != nil {
		_, had := x.stream.ttft()
		x.stream.observe(b.Body, x.srv.now())
		if ttft, ok := x.stream.ttft(); ok && !had && x.claim != nil {
			x.claim.FirstToken(ttft)
			x.trace.firstToken(ttft)
		}
	}
	if x.strip != nil {
		out, changed = x.strip.filter(b.Body, b.EndOfStream), true
	}
	if b.EndOfStream {
		x.finish(false)
	}
	return out, changed
}

// finish releases the claim once, with what the response phases observed.
func (x *exchange) finish(aborted bool) {
	if x.claim == nil {
		return
	}
	o := scheduler.Outcome{
		Status:  x.status,
		Aborted: aborted,
		// Only a 5xx that came from a worker counts against it; Envoy's own
		// replies with no upstream (an unknown cluster) say nothing of it.
		UpstreamFailure: x.status >= 500 && x.upstream,
	}
	var used usage
	if x.stream != nil {
		o.TTFT, o.TokensPerSec, o.CompletionTokens = x.stream.result()
		if aborted && x.stream.done {
			o.Aborted = false // the stream completed; Envoy just closed early
		}
		used = usage{input: x.stream.usagePrompt, output: o.CompletionTokens}
	}
	x.trace.finished(x.status, x.claim.Worker(), o.TTFT, used, o.Aborted)
	if o.Aborted {
		// A stream that ends before any response from the worker: the
		// client went away, or Envoy timed out (reported as such).
		if ce := x.srv.log.Check(zap.DebugLevel, "request ended early"); ce != nil {
			ce.Write(zap.String("request_id", x.requestID), zap.String("worker", x.claim.Worker()), zap.Int("status", x.status))
		}
	}
	x.claim.Finish(o)
	x.claim = nil
}

// extendTimeout tells Envoy the body reply will take up to maxWait: the
// request waits in the queue, and Envoy's per-message timeout must not cut
// it short.
func (x *exchange) extendTimeout(maxWait time.Duration) {
	if x.send == nil || (x.epp != nil && x.epp.duplexReq) {
		// In full-duplex mode Envoy runs no per-message timer to extend.
		return
	}
	_ = x.send(&extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(maxWait + queueMargin)})
}

func (x *exchange) close() {
	x.finish(true)
	x.trace.end()
}

func (x *exchange) fail(err error) *extprocv3.ProcessingResponse {
	e := classify(err)
	x.trace.refused(e)
	if e.Status >= 500 {
		x.srv.log.Warn("request refused", zap.String("request_id", x.requestID), zap.Int("status", e.Status), zap.Error(err))
	} else if ce := x.srv.log.Check(zap.DebugLevel, "request refused"); ce != nil {
		ce.Write(zap.String("request_id", x.requestID), zap.Int("status", e.Status), zap.Error(err))
	}
	return e.immediate(x.requestID)
}

func (x *exchange) listModels() *extprocv3.ProcessingResponse {
	// An adapter is listed as vLLM lists it: with its base as parent.
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
		Parent  string `json:"parent,omitempty"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range x.srv.sched.Models() {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "llm-router"})
	}
	for _, a := range x.srv.sched.Adapters() {
		list.Data = append(list.Data, model{ID: a.Name, Object: "model", OwnedBy: "llm-router", Parent: a.Base})
	}
	body, _ := json.Marshal(list)
	return immediateOK(body, x.requestID)
}

func (x *exchange) defaultModel() string {
	if ms := x.srv.sched.Models(); len(ms) == 1 {
		return ms[0]
	}
	return ""
}

func (x *exchange) actualWorker(upstream, upstreamHost string) string {
	if upstream != "" {
		return upstream
	}
	if upstreamHost != "" {
		if id, ok := x.srv.sched.WorkerByAddress(upstreamHost); ok {
			return id
		}
	}
	return ""
}

func headerValue(h *corev3.HeaderValue) string {
	if len(h.RawValue) > 0 {
		return string(h.RawValue)
	}
	return h.Value
}

func pathIs(path, want string) bool {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	return strings.TrimSuffix(path, "/") == want
}

// sanitizeRequestID keeps a client's request id only if it is short and
// printable: it is echoed in headers and used as a lookup key.
func sanitizeRequestID(s string) string {
	if len(s) == 0 || len(s) > 128 {
		return ""
	}
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return ""
		}
	}
	return s
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var decidedMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
	"llm_router": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"decided": structpb.NewBoolValue(true),
	}}),
}}
