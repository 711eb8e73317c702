package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// Routes adds the HTTP/JSON mapping of the service to mux, under /v1/: the
// routes of proto/llmrouter/v1/admin_http.yaml (google.api.http rules),
// served by the generated grpc-gateway handlers, in process, with the
// standard protobuf JSON mapping (lowerCamelCase fields, unknown fields
// refused). The Authorization header reaches the service as gRPC metadata,
// so both transports are checked the same way. Errors are
// {"error": {"code": "NOT_FOUND", "message": "..."}} with the HTTP status of
// the gRPC code.
func (s *Service) Routes(mux *http.ServeMux) error {
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions: protojson.MarshalOptions{Indent: "  ", EmitUnpopulated: true},
		}),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, err)
		}),
		// A route or verb the API does not have is NOT_FOUND, whatever the
		// method (the gateway would say 405 where another method exists).
		runtime.WithRoutingErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
			if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
				writeError(w, status.Errorf(codes.NotFound, "no method %s %s", r.Method, r.URL.Path))
				return
			}
			runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
		}),
	)
	// In process: the handlers call s directly, no second connection.
	if err := pb.RegisterAdminServiceHandlerServer(context.Background(), gw, s); err != nil {
		return fmt.Errorf("admin API HTTP mapping: %w", err)
	}
	mux.Handle("/v1/", http.MaxBytesHandler(gw, 1<<20))
	return nil
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
