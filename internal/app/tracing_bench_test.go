package app

import (
	"context"
	"io"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// BenchmarkExchangeTracing is BenchmarkExchange's 1 KB request carrying a
// client traceparent, with tracing off, on but sampling nothing, and on
// sampling every request (request, decide, claim, response and release
// spans with every attribute, batched for an exporter whose collector is
// not there, so the export itself costs a failed connection now and then,
// not a round trip).
func BenchmarkExchangeTracing(b *testing.B) {
	for _, tc := range []struct {
		name    string
		enabled bool
		ratio   float64
	}{{"off", false, 1}, {"unsampled", true, 0}, {"sampled", true, 1}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			cfg := config.Default()
			cfg.Workers = []config.Worker{{ID: "gpu-0", Address: "127.0.0.1:8001", Models: []string{"bench"}, MaxConcurrency: 1 << 20}}
			cfg.Tracing.Enabled, cfg.Tracing.SampleRatio, cfg.Tracing.ParentBased = tc.enabled, tc.ratio, false
			cfg.Tracing.Endpoint = "http://" + stack.MustFreeAddrs(1)[0]
			cfg.Tracing.ExportTimeout = config.Duration(100 * time.Millisecond)
			log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
			r, err := New(ctx, cfg, log)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = r.tracing.Shutdown(context.Background()) })
			phases := exchangePhases(1 << 10)
			hs := phases[0].GetRequestHeaders().GetHeaders()
			hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: "traceparent", RawValue: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")})
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
			if len(st.replies) != 3 || st.replies[1].GetRequestBody() == nil {
				b.Fatalf("replies %v", st.replies)
			}
		})
	}
}
