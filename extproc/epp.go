package extproc

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The Gateway API Inference Extension's endpoint-picker protocol (v1.0,
// docs/proposals/004-endpoint-picker-protocol in that repository): the names
// a gateway and its picker agree on.
const (
	// HeaderDestination and the same key in the metadata namespace
	// NamespaceLB carry the picked endpoint, ip:port, then the fallbacks,
	// comma-separated.
	HeaderDestination = "x-gateway-destination-endpoint"
	// NamespaceLB is the dynamic-metadata namespace of the destination and
	// of the endpoint that served (KeyServed).
	NamespaceLB = "envoy.lb"
	// KeyServed is the endpoint that served the request, reported by the
	// gateway on the response.
	KeyServed = "x-gateway-destination-endpoint-served"
	// NamespaceSubsetHint and KeySubset carry the endpoints the picker must
	// choose from, when the gateway restricts them.
	NamespaceSubsetHint = "envoy.lb.subset_hint"
	KeySubset           = "x-gateway-destination-endpoint-subset"
)

// streamChunk bounds each body message sent back to Envoy.
const streamChunk = 64 << 10

// eppExchange is what endpoint-picker mode adds to an exchange. The
// protocol streams bodies both ways (FULL_DUPLEX_STREAMED): Envoy sends the
// request body without waiting for the headers reply, so the router holds
// that reply until the body is in and the decision made, then sends it with
// the destination, followed by the body.
//
// Envoy says in its first message how it sends bodies (protocol_config).
// With any other request body mode (BUFFERED: the rendered config, which
// keeps fail-open) the router answers each message as in cluster-header
// mode and only the destination differs; with no protocol_config (older
// Envoy) full duplex is assumed, as the protocol requires.
type eppExchange struct {
	configured bool // the first message was read
	duplexReq  bool // request body FULL_DUPLEX_STREAMED
	duplexResp bool // response body FULL_DUPLEX_STREAMED

	pending *extprocv3.HeadersResponse // the request-headers reply, held
	body    []byte
	decided bool
	single  bool // the destination named the pick alone
}

func (e *eppExchange) configure(pc *extprocv3.ProtocolConfiguration) {
	if e.configured {
		return
	}
	e.configured = true
	e.duplexReq, e.duplexResp = true, true
	if pc != nil {
		e.duplexReq = pc.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		e.duplexResp = pc.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	}
}

// handleEPP is handle for endpoint-picker mode. Several replies can answer
// one message (the held headers reply, then the body): all but the last go
// out through x.send.
func (x *exchange) handleEPP(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	x.epp.configure(req.GetProtocolConfig())
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		x.subset = subsetHint(req.GetMetadataContext())
		resp := x.requestHeaders(r.RequestHeaders)
		if hr := resp.GetRequestHeaders(); hr != nil && x.epp.duplexReq {
			x.epp.pending = hr
			return nil // answered with the decision, once the body is in
		}
		return resp
	case *extprocv3.ProcessingRequest_RequestBody:
		b := r.RequestBody
		if !x.epp.duplexReq {
			return x.decideBuffered(b.Body)
		}
		if x.epp.decided {
			return streamedBody(true, b.Body, b.EndOfStream)
		}
		if int64(len(x.epp.body)+len(b.Body)) > x.srv.opts.MaxBodyBytes {
			return x.fail(ErrTooLarge)
		}
		x.epp.body = append(x.epp.body, b.Body...)
		if !b.EndOfStream {
			return nil
		}
		return x.decideEPP(true)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		if !x.epp.decided && x.epp.pending != nil {
			// The body ended with trailers rather than end_of_stream.
			resp := x.decideEPP(false)
			if resp == nil || resp.GetImmediateResponse() != nil {
				return resp
			}
			if !x.sendAll(resp) {
				return nil
			}
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		x.served = served(req.GetMetadataContext())
		if x.served == "" && x.claim != nil && x.epp.single {
			// No report (an ORIGINAL_DST cluster writes none) of a
			// destination that named the pick alone: the request went
			// there, so its failures count against the pick as any
			// worker's do. With a list, where it went is unknown.
			x.served, _ = x.srv.opts.AddressOf(x.claim.Worker())
		}
		resp := x.responseHeaders(r.ResponseHeaders)
		if !x.epp.duplexResp {
			return resp // as in cluster-header mode: STREAMED for SSE
		}
		// Envoy ignores mode overrides under a configured full-duplex
		// body mode; these say what the router wants should it change.
		switch {
		case resp.ModeOverride != nil:
			// A streamed (SSE) answer: keep its body coming, full duplex.
			resp.ModeOverride.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
			resp.ModeOverride.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
		case !r.ResponseHeaders.EndOfStream:
			// Any other answer is over for the router: its body need not
			// pass through (where the gateway allows mode overrides).
			resp.ModeOverride = &extprocfilterv3.ProcessingMode{
				ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND,
				ResponseBodyMode:   extprocfilterv3.ProcessingMode_NONE,
			}
		}
		return resp
	case *extprocv3.ProcessingRequest_ResponseBody:
		b := r.ResponseBody
		if !x.epp.duplexResp {
			return x.responseBody(b)
		}
		out, changed := x.passBody(b)
		if !changed {
			out = b.Body
		}
		return streamedBody(false, out, b.EndOfStream)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		x.finish(false)
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}

// decideEPP admits the buffered request and answers the held request
// headers with the destination; it returns the body reply (eos: the body
// ends there, not with trailers), or an error reply.
func (x *exchange) decideEPP(eos bool) *extprocv3.ProcessingResponse {
	raw := x.epp.body
	x.epp.body = nil
	if reply, ok := x.admit(raw); !ok {
		return reply
	}
	x.epp.decided = true
	dest, fail := x.destination()
	if fail != nil {
		return fail
	}
	hr := x.epp.pending
	if hr == nil || hr.Response == nil {
		hr = &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{}}
	}
	if hr.Response.HeaderMutation == nil {
		hr.Response.HeaderMutation = &extprocv3.HeaderMutation{}
	}
	mut := hr.Response.HeaderMutation
	mut.SetHeaders = append(mut.SetHeaders, setHeader(HeaderDestination, dest))
	x.addPrefiller(mut)
	body := raw
	if withUsage := x.upstreamBody(raw); withUsage != nil {
		body = withUsage
		mut.SetHeaders = append(mut.SetHeaders, setHeader("content-length", strconv.Itoa(len(body))))
	}
	hr.Response.ClearRouteCache = true
	headers := &extprocv3.ProcessingResponse{
		Response:        &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr},
		DynamicMetadata: destinationMetadata(dest),
	}
	if !x.sendAll(headers) {
		return nil
	}
	for len(body) > streamChunk {
		if !x.sendAll(streamedBody(true, body[:streamChunk], false)) {
			return nil
		}
		body = body[streamChunk:]
	}
	return streamedBody(true, body, eos)
}

// decideBuffered answers a whole (BUFFERED) request body with the
// destination, as requestBody does with a cluster name.
func (x *exchange) decideBuffered(raw []byte) *extprocv3.ProcessingResponse {
	if reply, ok := x.admit(raw); !ok {
		return reply
	}
	dest, fail := x.destination()
	if fail != nil {
		return fail
	}
	common := &extprocv3.CommonResponse{
		HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader(HeaderDestination, dest)}},
		ClearRouteCache: true,
	}
	x.addPrefiller(common.HeaderMutation)
	if withUsage := x.upstreamBody(raw); withUsage != nil {
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: withUsage}}
		common.HeaderMutation.SetHeaders = append(common.HeaderMutation.SetHeaders, setHeader("content-length", strconv.Itoa(len(withUsage))))
	}
	return &extprocv3.ProcessingResponse{
		Response:        &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}},
		DynamicMetadata: destinationMetadata(dest),
	}
}

// destination is the protocol's value for the claim: ip:port of the
// worker, then of its fallbacks. With no address for the worker (it left
// the registry since the claim) the claim is given back and the reply is
// an error.
func (x *exchange) destination() (string, *extprocv3.ProcessingResponse) {
	endpoints := x.endpoints()
	if len(endpoints) == 0 {
		x.finish(true)
		return "", x.fail(ErrUnavailable)
	}
	x.epp.single = len(endpoints) == 1
	return strings.Join(endpoints, ","), nil
}

// endpoints lists the claimed worker's ip:port, then its fallbacks'.
func (x *exchange) endpoints() []string {
	addr := x.srv.opts.AddressOf
	if addr == nil {
		return nil
	}
	first, ok := addr(x.claim.Worker())
	if !ok {
		return nil
	}
	out := []string{first}
	if r, ok := x.claim.(interface{ Fallbacks(n int) []string }); ok {
		for _, w := range r.Fallbacks(x.srv.opts.Fallbacks) {
			if a, ok := addr(w); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

func (x *exchange) sendAll(resp *extprocv3.ProcessingResponse) bool {
	if x.send == nil {
		return false
	}
	return x.send(resp) == nil
}

// streamedBody is a full-duplex body reply carrying body on to Envoy, on
// the request path (request) or the response path.
func streamedBody(request bool, body []byte, eos bool) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos}},
	}}}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
}

// destinationMetadata is the protocol's dynamic metadata for dest, with the
// router's own mark that it decided the request.
func destinationMetadata(dest string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		NamespaceLB: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			HeaderDestination: structpb.NewStringValue(dest),
		}}),
		"llm_router": decidedMetadata.Fields["llm_router"],
	}}
}

// subsetHint reads the gateway's subset: nil when it sent none, else the
// endpoints (possibly none) the pick must come from. The protocol sends a
// list; a comma-separated string is accepted too.
func subsetHint(md *corev3.Metadata) []string {
	ns, ok := md.GetFilterMetadata()[NamespaceSubsetHint]
	if !ok {
		return nil
	}
	v, ok := ns.GetFields()[KeySubset]
	if !ok {
		return nil
	}
	out := []string{}
	add := func(s string) {
		for part := range strings.SplitSeq(s, ",") {
			if p := strings.TrimSpace(part); p != "" {
				out = append(out, p)
			}
		}
	}
	if l := v.GetListValue(); l != nil {
		for _, e := range l.GetValues() {
			add(e.GetStringValue())
		}
	} else {
		add(v.GetStringValue())
	}
	return out
}

// served reads the endpoint that served the request from the response's
// metadata context, "" when the gateway did not say.
func served(md *corev3.Metadata) string {
	return md.GetFilterMetadata()[NamespaceLB].GetFields()[KeyServed].GetStringValue()
}
