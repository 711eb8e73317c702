package extproc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/llm-router/llm-router/scheduler"
)

// rankedScheduler hands out claims that know their fallbacks.
type rankedScheduler struct {
	*fakeScheduler
	fallbacks []string
}

type rankedClaim struct {
	*fakeClaim
	fallbacks []string
}

func (c rankedClaim) Fallbacks(n int) []string { return c.fallbacks[:min(n, len(c.fallbacks))] }

func (r rankedScheduler) Admit(ctx context.Context, req scheduler.Request) (Claim, error) {
	c, err := r.fakeScheduler.Admit(ctx, req)
	if err != nil {
		return nil, err
	}
	return rankedClaim{c.(*fakeClaim), r.fallbacks}, nil
}

var addrs = map[string]string{"w1": "10.0.0.1:8000", "w2": "10.0.0.2:8000", "w3": "10.0.0.3:8000"}

func runEPP(t *testing.T, sched Scheduler, fallbacks int) *fakeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := newFakeStream(ctx)
	srv := New(sched, Options{
		MaxBodyBytes: 1 << 20, EndpointPicker: true, Fallbacks: fallbacks,
		AddressOf: func(w string) (string, bool) { a, ok := addrs[w]; return a, ok },
	})
	go func() {
		_ = srv.Process(st)
		close(st.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-st.done
	})
	return st
}

// send delivers a message that must get no reply yet.
func (s *fakeStream) send(t *testing.T, req *extprocv3.ProcessingRequest) {
	t.Helper()
	s.in <- req
	select {
	case r := <-s.out:
		t.Fatalf("unexpected reply %v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func (s *fakeStream) next(t *testing.T) *extprocv3.ProcessingResponse {
	t.Helper()
	select {
	case r := <-s.out:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no response")
		return nil
	}
}

func chunk(body string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: eos}}}
}

func withMetadata(req *extprocv3.ProcessingRequest, ns string, fields map[string]any) *extprocv3.ProcessingRequest {
	s, err := structpb.NewStruct(fields)
	if err != nil {
		panic(err)
	}
	req.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{ns: s}}
	return req
}

// The request path in full-duplex mode: no reply until the body is in; then
// the held headers reply carries the destination (pick, then fallbacks) in
// the header and in envoy.lb metadata, and the body follows unchanged.
func TestEPPDestinationAfterTheWholeBody(t *testing.T) {
	sched := rankedScheduler{&fakeScheduler{worker: "w1"}, []string{"w3", "w2"}}
	st := runEPP(t, sched, 2)
	st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", HeaderDestination, "6.6.6.6:1"))
	body := `{"model":"m","messages":[],"max_tokens":7}`
	st.send(t, chunk(body[:10], false))
	st.in <- chunk(body[10:], true)

	hr := st.next(t)
	common := hr.GetRequestHeaders().GetResponse()
	want := "10.0.0.1:8000,10.0.0.3:8000,10.0.0.2:8000"
	if got := setHeaders(common.GetHeaderMutation())[HeaderDestination]; got != want {
		t.Fatalf("%s = %q, want %q", HeaderDestination, got, want)
	}
	if !common.GetClearRouteCache() {
		t.Fatal("route cache not cleared")
	}
	md := hr.GetDynamicMetadata().GetFields()[NamespaceLB].GetStructValue().GetFields()[HeaderDestination].GetStringValue()
	if md != want {
		t.Fatalf("envoy.lb metadata = %q, want the header's value %q", md, want)
	}
	br := st.next(t).GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if string(br.GetBody()) != body || !br.GetEndOfStream() {
		t.Fatalf("body reply %q eos=%v", br.GetBody(), br.GetEndOfStream())
	}
	if sched.lastReq.Subset != nil || sched.lastReq.MaxTokens != 7 {
		t.Fatalf("scheduler got %+v", sched.lastReq)
	}
	// No per-message timer under full duplex: nothing to extend.
	sched.lastReq.OnQueued(time.Second)
	select {
	case r := <-st.out:
		t.Fatalf("message timeout extended in full duplex: %v", r)
	default:
	}

	// Envoy used the second endpoint: the claim moves there.
	r := st.roundTrip(t, withMetadata(respHeaders(":status", "200", "content-type", "application/json"), NamespaceLB,
		map[string]any{KeyServed: "10.0.0.2:8000"}))
	if got := setHeaders(r.GetResponseHeaders().GetResponse().GetHeaderMutation())[headerRoutedNode]; got != "w2" {
		t.Fatalf("x-routed-node = %q after a fallback served", got)
	}
	if r.ModeOverride.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_NONE {
		t.Fatalf("a non-streamed answer should leave the body alone: %v", r.ModeOverride)
	}
	c := sched.claims[0]
	if c.Worker() != "w2" || len(c.finishes) != 1 {
		t.Fatalf("claim %+v", c)
	}
}

// The subset hint reaches the scheduler as given; an empty list is kept
// apart from no hint at all.
func TestEPPSubsetHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		hint any
		want []string
	}{
		{"list", []any{"10.0.0.2:8000", "10.0.0.3:8000"}, []string{"10.0.0.2:8000", "10.0.0.3:8000"}},
		{"comma string", "10.0.0.3:8000, 10.0.0.2:8000", []string{"10.0.0.3:8000", "10.0.0.2:8000"}},
		{"empty", []any{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := rankedScheduler{&fakeScheduler{worker: "w2"}, nil}
			st := runEPP(t, sched, 2)
			st.send(t, withMetadata(reqHeaders(false, ":method", "POST", ":path", "/v1/completions"), NamespaceSubsetHint, map[string]any{KeySubset: tc.hint}))
			st.in <- chunk(`{"model":"m","prompt":"hi"}`, true)
			st.next(t)
			st.next(t)
			if got := sched.lastReq.Subset; got == nil || !slices.Equal(got, tc.want) {
				t.Fatalf("subset %#v, want %#v", got, tc.want)
			}
		})
	}
}

// 503 with no eligible endpoint, 429 when shedding: immediate replies.
func TestEPPRefusals(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want typev3.StatusCode
	}{
		{scheduler.ErrNoHealthyWorker, 503},
		{scheduler.ErrShed, 429},
		{scheduler.ErrQueueFull, 429},
	} {
		sched := rankedScheduler{&fakeScheduler{err: tc.err}, nil}
		st := runEPP(t, sched, 2)
		st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions"))
		r := st.roundTrip(t, chunk(`{"model":"m","prompt":"x"}`, true))
		if got := r.GetImmediateResponse().GetStatus().GetCode(); got != tc.want {
			t.Errorf("%v: status %v, want %v", tc.err, got, tc.want)
		}
	}
	// Over max_body_bytes while still streaming in: 413 at once.
	st := runEPP(t, rankedScheduler{&fakeScheduler{worker: "w1"}, nil}, 2)
	st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions"))
	if r := st.roundTrip(t, chunk(strings.Repeat("x", 2<<20), false)); r.GetImmediateResponse().GetStatus().GetCode() != 413 {
		t.Fatalf("oversized body: %v", r)
	}
}

// A streamed answer stays full duplex: every chunk is answered with the
// chunk to pass on, the stream is observed and the claim released at its end.
func TestEPPStreamedResponse(t *testing.T) {
	sched := rankedScheduler{&fakeScheduler{worker: "w1"}, nil}
	st := runEPP(t, sched, 0)
	st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions"))
	st.in <- chunk(`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, true)
	if got := setHeaders(st.next(t).GetRequestHeaders().GetResponse().GetHeaderMutation())[HeaderDestination]; got != "10.0.0.1:8000" {
		t.Fatalf("destination %q with no fallbacks asked", got)
	}
	st.next(t)
	r := st.roundTrip(t, respHeaders(":status", "200", "content-type", "text/event-stream"))
	if m := r.ModeOverride; m.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED || m.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SEND {
		t.Fatalf("mode override %v", m)
	}
	ev := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
	b := st.roundTrip(t, respBody(ev, false)).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if string(b.GetBody()) != ev || b.GetEndOfStream() {
		t.Fatalf("chunk reply %q", b.GetBody())
	}
	b = st.roundTrip(t, respBody("data: [DONE]\n\n", true)).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if !b.GetEndOfStream() {
		t.Fatal("end of stream not passed on")
	}
	c := sched.claims[0]
	if len(c.finishes) != 1 || c.finishes[0].CompletionTokens != 1 {
		t.Fatalf("claim %+v", c.finishes)
	}
}

// With a buffered request body (protocol_config in Envoy's first message),
// each message is answered at once and the body reply carries the
// destination; streamed answers are switched to STREAMED as in
// cluster-header mode.
func TestEPPBufferedBodies(t *testing.T) {
	sched := rankedScheduler{&fakeScheduler{worker: "w1"}, []string{"w2"}}
	st := runEPP(t, sched, 1)
	first := reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions")
	first.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE}
	if r := st.roundTrip(t, first); r.GetRequestHeaders() == nil {
		t.Fatalf("headers not answered at once: %v", r)
	}
	r := st.roundTrip(t, reqBody(`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`))
	// Envoy's per-message timer runs in this mode: a queued request
	// extends it.
	sched.lastReq.OnQueued(time.Second)
	if d := st.next(t).GetOverrideMessageTimeout().AsDuration(); d != time.Second+queueMargin {
		t.Fatalf("override_message_timeout %v", d)
	}
	common := r.GetRequestBody().GetResponse()
	want := "10.0.0.1:8000,10.0.0.2:8000"
	if got := setHeaders(common.GetHeaderMutation())[HeaderDestination]; got != want || !common.GetClearRouteCache() {
		t.Fatalf("destination %q, want %q", got, want)
	}
	if md := r.GetDynamicMetadata().GetFields()[NamespaceLB].GetStructValue().GetFields()[HeaderDestination].GetStringValue(); md != want {
		t.Fatalf("metadata %q", md)
	}
	r = st.roundTrip(t, respHeaders(":status", "200", "content-type", "text/event-stream"))
	if r.ModeOverride.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_STREAMED {
		t.Fatalf("mode override %v", r.ModeOverride)
	}
	if b := st.roundTrip(t, respBody("data: [DONE]\n\n", true)).GetResponseBody(); b == nil || b.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		t.Fatalf("body reply %v", b)
	}
	if c := sched.claims[0]; len(c.finishes) != 1 {
		t.Fatalf("claim %+v", c)
	}
}
