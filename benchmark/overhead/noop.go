package overhead

import (
	"context"
	"errors"
	"io"
	"net"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// noopExtProc is the floor of the overhead benchmark: an ext_proc server
// that answers every phase the router's rendered Envoy config sends
// (request headers, the buffered body, response headers) without reading
// anything. Its only work is what Envoy needs to route the request the way
// the router's reply does: the routing header on the body reply and the
// "decided" mark, so the fail-open Lua filter takes the same branch.
type noopExtProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	headers, body, response *extprocv3.ProcessingResponse
}

var _ extprocv3.ExternalProcessorServer = (*noopExtProc)(nil)

// newNoopExtProc answers every request's body phase with cluster as its
// upstream. The replies are built once: the floor allocates nothing per
// request beyond what gRPC does.
func newNoopExtProc(cluster string) *noopExtProc {
	decided := &structpb.Struct{Fields: map[string]*structpb.Value{
		"llm_router": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"decided": structpb.NewBoolValue(true),
		}}),
	}}
	return &noopExtProc{
		headers: &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{},
		}},
		body: &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
						Header:       &corev3.HeaderValue{Key: "x-llm-cluster", RawValue: []byte(cluster)},
						AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
					}}},
					ClearRouteCache: true,
				},
			}},
			DynamicMetadata: decided,
		},
		response: &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{},
		}},
	}
}

// reply is the canned answer to one phase; nil for a phase the rendered
// config never sends.
func (n *noopExtProc) reply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return n.headers
	case *extprocv3.ProcessingRequest_RequestBody:
		return n.body
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return n.response
	}
	return nil
}

// Process answers one HTTP request's phases until Envoy closes the stream.
func (n *noopExtProc) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return err
		}
		resp := n.reply(req)
		if resp == nil {
			return status.Errorf(codes.InvalidArgument, "no-op ext_proc: unexpected phase %T", req.Request)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// ServeNoopExtProc serves the no-op ext_proc server, with the gRPC health
// service Envoy's cluster checks, on lis until ctx ends. cluster is the
// x-llm-cluster value every request gets; opts are gRPC server options
// (none: grpc-go's defaults, as the router uses).
func ServeNoopExtProc(ctx context.Context, lis net.Listener, cluster string, opts ...grpc.ServerOption) error {
	srv := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(srv, newNoopExtProc(cluster))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	err := srv.Serve(lis)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
