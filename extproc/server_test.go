package extproc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// fakeScheduler admits to a fixed worker, or fails with err.
type fakeScheduler struct {
	mu      sync.Mutex
	worker  string
	err     error
	claims  []*fakeClaim
	lastReq scheduler.Request
}

func (f *fakeScheduler) Admit(_ context.Context, r scheduler.Request) (Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastReq = r
	if f.err != nil {
		return nil, f.err
	}
	c := &fakeClaim{worker: f.worker}
	f.claims = append(f.claims, c)
	return c, nil
}

func (f *fakeScheduler) WorkerByAddress(addr string) (string, bool) {
	if addr == "10.0.0.2:8000" {
		return "w2", true
	}
	return "", false
}

func (f *fakeScheduler) Models() []string { return []string{"m"} }

func (f *fakeScheduler) Adapters() []state.Adapter {
	return []state.Adapter{{Name: "m-sql", Base: "m"}}
}

type fakeClaim struct {
	mu       sync.Mutex
	worker   string
	finishes []scheduler.Outcome
	firsts   []time.Duration
}

func (c *fakeClaim) FirstToken(ttft time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.firsts = append(c.firsts, ttft)
}

func (c *fakeClaim) Worker() string { c.mu.Lock(); defer c.mu.Unlock(); return c.worker }
func (c *fakeClaim) Model() string  { return "" }
func (c *fakeClaim) Moved(to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.worker = to
}

func (c *fakeClaim) Finish(o scheduler.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishes = append(c.finishes, o)
}

// fakeStream feeds requests to Process and collects its responses.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	in   chan *extprocv3.ProcessingRequest
	out  chan *extprocv3.ProcessingResponse
	done chan struct{}
}

func newFakeStream(ctx context.Context) *fakeStream {
	return &fakeStream{ctx: ctx, in: make(chan *extprocv3.ProcessingRequest), out: make(chan *extprocv3.ProcessingResponse, 8), done: make(chan struct{})}
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) Send(r *extprocv3.ProcessingResponse) error {
	s.out <- r
	return nil
}

func (s *fakeStream) Recv() (*extprocv3.ProcessingRequest, error) {
	select {
	case r, ok := <-s.in:
		if !ok {
			return nil, io.EOF
		}
		return r, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func run(t *testing.T, sched Scheduler) (*fakeStream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := newFakeStream(ctx)
	srv := New(sched, Options{ClusterFor: func(w, m string) string { return w + ".via." + m }, MaxBodyBytes: 1 << 20})
	go func() {
		_ = srv.Process(st)
		close(st.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-st.done
	})
	return st, cancel
}

func (s *fakeStream) roundTrip(t *testing.T, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	s.in <- req
	select {
	case r := <-s.out:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no response")
		return nil
	}
}

func headers(eos bool, kv ...string) *extprocv3.HttpHeaders {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.HttpHeaders{Headers: hm, EndOfStream: eos}
}

func reqHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: headers(eos, kv...)}}
}

func reqBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

func respHeaders(kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: headers(false, kv...)}}
}

func respBody(chunk string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(chunk), EndOfStream: eos}}}
}

func setHeaders(m *extprocv3.HeaderMutation) map[string]string {
	out := map[string]string{}
	for _, h := range m.GetSetHeaders() {
		out[h.Header.Key] = string(h.Header.RawValue)
	}
	return out
}

func TestDecisionSetsClusterAndStripsClientCopy(t *testing.T) {
	sched := &fakeScheduler{worker: "w1"}
	st, _ := run(t, sched)
	r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", "x-llm-cluster", "evil", "x-request-id", "abc"))
	mut := r.GetRequestHeaders().GetResponse().GetHeaderMutation()
	if len(mut.GetRemoveHeaders()) == 0 || mut.GetRemoveHeaders()[0] != headerCluster {
		t.Fatalf("client's x-llm-cluster not removed: %v", mut)
	}
	r = st.roundTrip(t, reqBody(`{"model":"m","messages":[],"max_tokens":7}`))
	common := r.GetRequestBody().GetResponse()
	if got := setHeaders(common.GetHeaderMutation())[headerCluster]; got != "w1.via.m" {
		t.Fatalf("x-llm-cluster = %q", got)
	}
	if !common.GetClearRouteCache() {
		t.Fatalf("route cache must be cleared for the header to route")
	}
	if sched.lastReq.ID != "abc" || sched.lastReq.MaxTokens != 7 {
		t.Fatalf("scheduler got %+v", sched.lastReq)
	}
	// Envoy served it on w2 after a retry: the claim follows, the client
	// sees the real worker, and the internal headers are removed.
	r = st.roundTrip(t, respHeaders(":status", "200", "content-type", "application/json", headerUpstream, "w2"))
	resp := r.GetResponseHeaders().GetResponse().GetHeaderMutation()
	if got := setHeaders(resp)[headerRoutedNode]; got != "w2" {
		t.Fatalf("x-routed-node = %q", got)
	}
	if setHeaders(resp)[headerRequestID] != "abc" {
		t.Fatalf("x-request-id not echoed")
	}
	c := sched.claims[0]
	if c.Worker() != "w2" || len(c.finishes) != 1 || c.finishes[0].Status != 200 {
		t.Fatalf("claim %+v", c)
	}
}

func TestStreamedResponseIsObservedAndReleasedOnce(t *testing.T) {
	sched := &fakeScheduler{worker: "w1"}
	st, _ := run(t, sched)
	st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions"))
	st.roundTrip(t, reqBody(`{"model":"m","messages":[],"stream":true}`))
	r := st.roundTrip(t, respHeaders(":status", "200", "content-type", "text/event-stream", headerUpstreamHost, "10.0.0.2:8000"))
	if r.ModeOverride.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_STREAMED {
		t.Fatalf("streamed response must switch to STREAMED body mode")
	}
	st.roundTrip(t, respBody("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choi", false))
	sched.mu.Lock()
	first := sched.claims[0]
	sched.mu.Unlock()
	first.mu.Lock()
	if len(first.firsts) != 1 {
		t.Errorf("first token reported %d times on its arrival, want once", len(first.firsts))
	}
	first.mu.Unlock()
	st.roundTrip(t, respBody("ces\":[{\"delta\":{\"content\":\"b\"}}]}\n\n", false))
	st.roundTrip(t, respBody("data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\ndata: [DONE]\n\n", true))
	close(st.in)
	<-st.done
	c := sched.claims[0]
	if c.Worker() != "w2" {
		t.Fatalf("upstream address did not map to w2: %s", c.Worker())
	}
	if len(c.finishes) != 1 {
		t.Fatalf("finished %d times", len(c.finishes))
	}
	if o := c.finishes[0]; o.Aborted || o.CompletionTokens != 5 {
		t.Fatalf("outcome %+v", o)
	}
	// The first content token was reported once, when it arrived, with
	// the TTFT the release reports too.
	if len(c.firsts) != 1 || c.firsts[0] != c.finishes[0].TTFT || c.firsts[0] <= 0 {
		t.Fatalf("first token reported %v, want once with the outcome's TTFT %v", c.firsts, c.finishes[0].TTFT)
	}
}

func TestAbortBeforeResponseReleases(t *testing.T) {
	sched := &fakeScheduler{worker: "w1"}
	st, cancel := run(t, sched)
	st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions"))
	st.roundTrip(t, reqBody(`{"model":"m","prompt":"x"}`))
	cancel() // Envoy resets the stream: the client went away
	<-st.done
	c := sched.claims[0]
	if len(c.finishes) != 1 || !c.finishes[0].Aborted {
		t.Fatalf("abort not released exactly once: %+v", c.finishes)
	}
}

func TestImmediateErrors(t *testing.T) {
	tests := []struct {
		name   string
		reqs   []*extprocv3.ProcessingRequest
		sched  *fakeScheduler
		status int
		code   string
	}{
		{"unknown path", []*extprocv3.ProcessingRequest{reqHeaders(false, ":method", "POST", ":path", "/admin")}, &fakeScheduler{}, 404, "unknown_url"},
		{"GET on an inference path", []*extprocv3.ProcessingRequest{reqHeaders(true, ":method", "GET", ":path", "/v1/completions")}, &fakeScheduler{}, 405, "method_not_allowed"},
		{"no body", []*extprocv3.ProcessingRequest{reqHeaders(true, ":method", "POST", ":path", "/v1/completions")}, &fakeScheduler{}, 400, "invalid_request"},
		{
			"unknown model",
			[]*extprocv3.ProcessingRequest{reqHeaders(false, ":method", "POST", ":path", "/v1/completions"), reqBody(`{"model":"x","prompt":"y"}`)},
			&fakeScheduler{err: &scheduler.ModelError{Model: "x", Err: scheduler.ErrUnknownModel}}, 404, "model_not_found",
		},
		{
			"at capacity",
			[]*extprocv3.ProcessingRequest{reqHeaders(false, ":method", "POST", ":path", "/v1/completions"), reqBody(`{"model":"m","prompt":"y"}`)},
			&fakeScheduler{err: &scheduler.RetryAfter{Err: scheduler.ErrAtCapacity, After: 2 * time.Second}}, 429, "at_capacity",
		},
		{
			"objective unattainable",
			[]*extprocv3.ProcessingRequest{reqHeaders(false, ":method", "POST", ":path", "/v1/completions"), reqBody(`{"model":"m","prompt":"y"}`)},
			&fakeScheduler{err: &scheduler.RetryAfter{Err: fmt.Errorf("m: %w", scheduler.ErrObjectiveUnmet), After: 2 * time.Second}}, 429, "slo_unattainable",
		},
		{
			"adapter load failed",
			[]*extprocv3.ProcessingRequest{reqHeaders(false, ":method", "POST", ":path", "/v1/completions"), reqBody(`{"model":"m-sql","prompt":"y"}`)},
			&fakeScheduler{err: fmt.Errorf("m-sql on w0: %w: status 404: no adapter at /x", scheduler.ErrAdapterLoad)}, 503, "adapter_load_failed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := run(t, tc.sched)
			var r *extprocv3.ProcessingResponse
			for _, req := range tc.reqs {
				r = st.roundTrip(t, req)
			}
			im := r.GetImmediateResponse()
			if im == nil || int(im.Status.Code) != tc.status {
				t.Fatalf("got %v, want immediate %d", r, tc.status)
			}
			var body struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.Unmarshal(im.Body, &body); err != nil || body.Error.Code != tc.code || body.Error.Message == "" {
				t.Fatalf("body %s (err %v), want code %q", im.Body, err, tc.code)
			}
			if tc.status == 429 && setHeaders(im.Headers)["retry-after"] != "2" {
				t.Fatalf("retry-after = %q", setHeaders(im.Headers)["retry-after"])
			}
		})
	}
}

// GET /v1/models lists the models and, as vLLM does, each adapter with its
// base model as parent.
func TestListModelsWithAdapters(t *testing.T) {
	st, _ := run(t, &fakeScheduler{worker: "w1"})
	r := st.roundTrip(t, reqHeaders(true, ":method", "GET", ":path", "/v1/models"))
	im := r.GetImmediateResponse()
	if im == nil || im.Status.Code != 200 {
		t.Fatalf("got %v, want 200", r)
	}
	var list struct {
		Data []struct{ ID, Parent string }
	}
	if err := json.Unmarshal(im.Body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 2 || list.Data[0].ID != "m" || list.Data[0].Parent != "" || list.Data[1].ID != "m-sql" || list.Data[1].Parent != "m" {
		t.Fatalf("models %+v; want m, then m-sql with parent m", list.Data)
	}
}
