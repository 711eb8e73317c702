// Package extproc is the Envoy protocol adapter: an ext_proc gRPC server
// that reads the few fields the router needs from each request, asks the
// scheduler for a worker, and tells Envoy where to send the request by
// setting the x-llm-cluster header. Envoy does the proxying, streaming,
// retries and failover; this package only decides and observes.
//
// One ext_proc stream is one HTTP request. Its phases are: request headers
// (path, auth, request id, latency objectives), request body (buffered:
// model, max_tokens, stream; the decision), response headers (status, which
// worker really served after any Envoy retry) and, for streamed responses
// only, response body chunks (time to first token, token counts, the end of
// the stream).
package extproc

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// Header names the router reads or writes.
const (
	// headerCluster carries the routing decision to Envoy's route
	// (cluster_header). Always overwritten; a client's copy is removed.
	headerCluster = "x-llm-cluster"
	// headerUpstream is added by the rendered Envoy route to each response
	// and names the worker that actually served it; removed before the
	// client sees the response.
	headerUpstream = "x-llm-upstream"
	// headerUpstreamHost is the upstream address fallback for configs that
	// do not carry worker metadata.
	headerUpstreamHost = "x-llm-upstream-host"
	headerRoutedNode   = "x-routed-node"
	headerRequestID    = "x-request-id"
	headerPriority     = "x-llm-priority"
	headerAuth         = "authorization"
)

// queueMargin is added to the longest queue wait when extending Envoy's
// message timeout, so Envoy never gives up on a request the router still
// holds (the rendered max_message_timeout leaves room for it).
const queueMargin = 5 * time.Second

// Scheduler is what the adapter needs from the scheduler.
type Scheduler interface {
	Admit(ctx context.Context, r scheduler.Request) (Claim, error)
	WorkerByAddress(addr string) (string, bool)
	Models() []string
	// Adapters lists the LoRA adapters some worker serves, with their
	// base model (for /v1/models).
	Adapters() []state.Adapter
}

// Claim is one admitted request's hold on a worker.
type Claim interface {
	Worker() string
	// Model is the model the request runs on: the base model of the
	// adapter it named, else its own.
	Model() string
	Moved(to string)
	// FirstToken reports the response's first content token, ttft after
	// the claim; the adapter calls it once, from the response body phase,
	// and it must not block (the scheduler tells the store off this path).
	FirstToken(ttft time.Duration)
	Finish(o scheduler.Outcome)
}

// Options configure the server.
type Options struct {
	MaxBodyBytes int64
	// Auth checks the Authorization header; nil lets every request in as
	// Anonymous.
	Auth Authenticator
	// ForwardAuthorization keeps the client's Authorization header on the
	// upstream request (off: removed, so tenant keys never reach workers).
	ForwardAuthorization bool
	// RequestUsage asks workers for usage on streamed OpenAI requests that
	// lack it (exact token counts) and strips it from the response.
	RequestUsage bool
	// ClusterFor names the Envoy cluster for a worker and model.
	ClusterFor func(worker, model string) string
	// EndpointPicker speaks the Gateway API Inference Extension's
	// endpoint-picker protocol instead of naming a cluster (epp.go).
	EndpointPicker bool
	// Fallbacks is how many endpoints follow the pick in endpoint-picker
	// mode.
	Fallbacks int
	// Objectives maps llm-d inference objective names to priorities
	// (x-llm-d-inference-objective); unnamed objectives are ignored.
	Objectives map[string]state.Priority
	// SLO fills and bounds each request's latency objectives.
	SLO SLOPolicy
	// FairnessIDIgnored, when set, counts a fairness id header its key
	// does not allow (ignored: the key's tenant stands).
	FairnessIDIgnored func()
	// AddressOf maps a worker to its ip:port, for endpoint-picker mode.
	AddressOf func(worker string) (string, bool)
	// Tracer makes each request's spans (trace.go) and passes the
	// request span's W3C trace context to the worker; nil: no spans, and
	// the client's trace context headers reach the worker as sent.
	Tracer trace.Tracer
	Logger *zap.Logger
	Now    func() time.Time
}

// Server implements Envoy's ExternalProcessor service.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	sched    Scheduler
	opts     Options
	log      *zap.Logger
	now      func() time.Time
	draining atomic.Bool
}

// New returns a server deciding with sched.
func New(sched Scheduler, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ClusterFor == nil {
		opts.ClusterFor = func(worker, _ string) string { return worker }
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	return &Server{sched: sched, opts: opts, log: opts.Logger, now: opts.Now}
}

// Drain makes the server refuse new requests (503) while open streams
// finish; used during graceful shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

// Process handles one HTTP request's ext_proc stream.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	x := newExchange(stream.Context(), s)
	x.send = stream.Send
	defer x.close()
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || stream.Context().Err() != nil {
				return nil // Envoy ended the stream: a normal end
			}
			return err
		}
		resp := x.handle(req)
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			if status.Code(err) == codes.Canceled || stream.Context().Err() != nil {
				return nil
			}
			return err
		}
	}
}

// schedulerAdapter lets *scheduler.Scheduler satisfy Scheduler.
type schedulerAdapter struct{ *scheduler.Scheduler }

func (a schedulerAdapter) Admit(ctx context.Context, r scheduler.Request) (Claim, error) {
	t, err := a.Scheduler.Admit(ctx, r)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// FromScheduler adapts the real scheduler.
func FromScheduler(s *scheduler.Scheduler) Scheduler { return schedulerAdapter{s} }
