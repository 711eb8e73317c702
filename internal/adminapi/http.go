package adminapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// Routes adds the HTTP/JSON mapping of the service to mux: the standard
// protobuf JSON mapping (lowerCamelCase fields) on these routes:
//
//	GET    /v1/workers[?model=M]          ListWorkers
//	GET    /v1/workers/{id}               GetWorker
//	POST   /v1/workers                    RegisterWorker
//	POST   /v1/workers/{id}:heartbeat     Heartbeat
//	DELETE /v1/workers/{id}               DeregisterWorker
//	POST   /v1/workers/{id}:drain         DrainWorker
//	POST   /v1/workers/{id}:undrain       UndrainWorker
//	GET    /v1/decisions/{request_id}     ExplainDecision
//	GET    /v1/stats                      GetStats
//
// Errors are {"error": {"code": "NOT_FOUND", "message": "..."}} with the
// HTTP status of the gRPC code.
func (s *Service) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/workers", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.ListWorkers(incoming(r), &pb.ListWorkersRequest{Model: r.URL.Query().Get("model")}))
	})
	mux.HandleFunc("GET /v1/workers/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.GetWorker(incoming(r), &pb.GetWorkerRequest{Id: r.PathValue("id")}))
	})
	mux.HandleFunc("POST /v1/workers", func(w http.ResponseWriter, r *http.Request) {
		req := &pb.RegisterWorkerRequest{}
		if !readBody(w, r, req) {
			return
		}
		reply(w)(s.RegisterWorker(incoming(r), req))
	})
	mux.HandleFunc("DELETE /v1/workers/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.DeregisterWorker(incoming(r), &pb.DeregisterWorkerRequest{Id: r.PathValue("id")}))
	})
	mux.HandleFunc("POST /v1/workers/{idverb}", func(w http.ResponseWriter, r *http.Request) {
		id, verb, _ := strings.Cut(r.PathValue("idverb"), ":")
		ctx := incoming(r)
		switch verb {
		case "heartbeat":
			req := &pb.HeartbeatRequest{}
			if !readBody(w, r, req) {
				return
			}
			req.Id = id
			reply(w)(s.Heartbeat(ctx, req))
		case "drain":
			reply(w)(s.DrainWorker(ctx, &pb.DrainWorkerRequest{Id: id}))
		case "undrain":
			reply(w)(s.UndrainWorker(ctx, &pb.UndrainWorkerRequest{Id: id}))
		default:
			writeError(w, status.Errorf(codes.NotFound, "no method %q (heartbeat, drain, undrain)", verb))
		}
	})
	mux.HandleFunc("GET /v1/decisions/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.ExplainDecision(incoming(r), &pb.ExplainDecisionRequest{RequestId: r.PathValue("id")}))
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.GetStats(incoming(r), &pb.GetStatsRequest{}))
	})
}

// incoming carries the HTTP Authorization header as gRPC metadata, so the
// service checks both transports the same way.
func incoming(r *http.Request) context.Context {
	md := metadata.MD{}
	if a := r.Header.Get("Authorization"); a != "" {
		md.Set("authorization", a)
	}
	return metadata.NewIncomingContext(r.Context(), md)
}

func readBody(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, status.Errorf(codes.InvalidArgument, "read body: %v", err))
		return false
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return true
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		writeError(w, status.Errorf(codes.InvalidArgument, "body: %v", err))
		return false
	}
	return true
}

// reply writes a method's answer: reply(w)(s.Method(ctx, req)).
func reply(w http.ResponseWriter) func(proto.Message, error) {
	return func(m proto.Message, err error) { answer(w, m, err) }
}

func answer(w http.ResponseWriter, m proto.Message, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  ", EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		writeError(w, status.Errorf(codes.Internal, "encode: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(st.Code()))
	_ = json.NewEncoder(w).Encode(map[string]map[string]string{
		"error": {"code": strings.ToUpper(codeName(st.Code())), "message": st.Message()},
	})
}

func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.FailedPrecondition:
		return http.StatusPreconditionFailed
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func codeName(c codes.Code) string {
	name := c.String()
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
