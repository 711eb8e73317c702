package app

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/llm-router/llm-router/internal/config"
)

// scriptedStream plays one HTTP request's phases, as Envoy sends them with
// the rendered config, to the ext_proc server, in the calling goroutine.
type scriptedStream struct {
	grpc.ServerStream
	ctx     context.Context
	phases  []*extprocv3.ProcessingRequest
	next    int
	replies []*extprocv3.ProcessingResponse
}

func (s *scriptedStream) Context() context.Context { return s.ctx }

func (s *scriptedStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if s.next == len(s.phases) {
		return nil, io.EOF
	}
	s.next++
	return s.phases[s.next-1], nil
}

func (s *scriptedStream) Send(r *extprocv3.ProcessingResponse) error {
	s.replies = append(s.replies, r)
	return nil
}

func headerMap(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// exchangePhases are the phases of one non-streamed chat request of about
// bodyBytes: request headers as Envoy forwards them, the buffered body, and
// the worker's response headers with the route's upstream headers.
func exchangePhases(bodyBytes int) []*extprocv3.ProcessingRequest {
	prompt := strings.Repeat("word ", max(bodyBytes-80, 5)/5)
	body := `{"model":"bench","max_tokens":8,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	return []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(
			":authority", "127.0.0.1:8080", ":path", "/v1/chat/completions", ":method", "POST", ":scheme", "http",
			"content-type", "application/json", "content-length", "1024", "user-agent", "bench",
			"x-forwarded-proto", "http", "x-request-id", "6f1c1d8e-4c52-4b0e-9d1e-2f7a3b7c9e10",
		)}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(
			":status", "200", "content-type", "application/json", "content-length", "312",
			"x-llm-upstream", "gpu-0", "x-llm-upstream-host", "127.0.0.1:8001",
		)}}},
	}
}

// BenchmarkExchange is one full request through the router's ext_proc
// server as `llm-router serve` builds it (default config, one worker, the
// in-memory store, decision lines encoded at info level and discarded):
// request headers, a 1 KB (or 256 KB) body with the decision and the claim,
// response headers with the release. gRPC itself is not included; the
// overhead benchmark (llm-bench overhead) measures it against a no-op
// server.
func BenchmarkExchange(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KB", func(b *testing.B) {
			ctx := context.Background()
			cfg := config.Default()
			cfg.Workers = []config.Worker{{ID: "gpu-0", Address: "127.0.0.1:8001", Models: []string{"bench"}, MaxConcurrency: 1 << 20}}
			log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
			r, err := New(ctx, cfg, log)
			if err != nil {
				b.Fatal(err)
			}
			phases := exchangePhases(size)
			b.SetBytes(int64(len(phases[1].GetRequestBody().GetBody())))
			st := &scriptedStream{ctx: ctx, phases: phases, replies: make([]*extprocv3.ProcessingResponse, 0, 3)}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				st.next, st.replies = 0, st.replies[:0]
				if err := r.extproc.Process(st); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if len(st.replies) != 3 || st.replies[1].GetRequestBody() == nil ||
				st.replies[1].GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders()[0].GetHeader().GetKey() != "x-llm-cluster" {
				b.Fatalf("replies %v", st.replies)
			}
		})
	}
}
