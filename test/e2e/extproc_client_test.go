package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// epConn talks to a router's ext_proc server the way Envoy does, so tests
// can hold a request at any phase (a barrier before the body, a claim held
// by never sending the response).
type epConn struct {
	conn   *grpc.ClientConn
	client extprocv3.ExternalProcessorClient
}

func dialExtProc(t *testing.T, addr string) *epConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &epConn{conn: conn, client: extprocv3.NewExternalProcessorClient(conn)}
}

// epRequest is one HTTP request's ext_proc stream.
type epRequest struct {
	stream extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
	queued bool // the router extended the message timeout: it waited
}

func hdrs(kv ...string) *extprocv3.HttpHeaders {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.HttpHeaders{Headers: hm}
}

// start opens a stream and sends the request headers.
func (c *epConn) start(ctx context.Context, extra ...string) (*epRequest, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.client.Process(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &epRequest{stream: st, cancel: cancel}
	kv := append([]string{":method", "POST", ":path", "/v1/chat/completions"}, extra...)
	if _, err := r.roundTrip(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(kv...)}}); err != nil {
		cancel()
		return nil, err
	}
	return r, nil
}

func (r *epRequest) roundTrip(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := r.stream.Send(req); err != nil {
		return nil, err
	}
	return r.stream.Recv()
}

// decide sends the body and returns the worker chosen (from the cluster
// header, "<worker>.via.<model>") or the immediate-response status.
func (r *epRequest) decide(body string) (worker string, status int, err error) {
	resp, err := r.roundTrip(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true},
	}})
	// A queued request first extends Envoy's message timeout; the decision
	// follows when a worker frees up.
	for err == nil && resp.Response == nil && resp.OverrideMessageTimeout != nil {
		r.queued = true
		resp, err = r.stream.Recv()
	}
	if err != nil {
		return "", 0, err
	}
	if im := resp.GetImmediateResponse(); im != nil {
		return "", int(im.Status.Code), nil
	}
	for _, h := range resp.GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if h.Header.Key == "x-llm-cluster" {
			w, _, _ := strings.Cut(string(h.Header.RawValue), ".via.")
			return w, 200, nil
		}
	}
	return "", 0, fmt.Errorf("no decision in %v", resp)
}

// respond plays the response phase (non-streamed): the claim is released.
func (r *epRequest) respond(status int) error {
	_, err := r.roundTrip(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: hdrs(":status", fmt.Sprint(status), "content-type", "application/json"),
	}})
	if err == nil {
		err = r.stream.CloseSend()
	}
	r.cancel()
	return err
}

// stream plays a streamed response: tokens SSE events spaced by gap.
func (r *epRequest) streamResponse(tokens int, gap time.Duration) error {
	if _, err := r.roundTrip(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: hdrs(":status", "200", "content-type", "text/event-stream"),
	}}); err != nil {
		return err
	}
	for i := 0; i < tokens; i++ {
		time.Sleep(gap) // the token pace the test asked for
		chunk := `data: {"choices":[{"delta":{"content":"tok "}}]}` + "\n\n"
		eos := false
		if i == tokens-1 {
			chunk += "data: [DONE]\n\n"
			eos = true
		}
		if _, err := r.roundTrip(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: []byte(chunk), EndOfStream: eos},
		}}); err != nil {
			return err
		}
	}
	r.cancel()
	return nil
}

func chatBody(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`
}
