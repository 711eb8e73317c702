package extproc

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/llm-router/llm-router/scheduler"
)

// Request-level error kinds detected at the protocol boundary.
var (
	ErrTooLarge    = errors.New("request body too large")
	ErrNotFound    = errors.New("unknown path")
	ErrMethod      = errors.New("method not allowed")
	ErrUnavailable = errors.New("router is shutting down")
	// ErrUnauthenticated: no API key, or one the Authenticator does not
	// know.
	ErrUnauthenticated = errors.New("missing or invalid API key")
	// ErrBadPriority: an x-llm-priority value that is not a priority.
	ErrBadPriority = errors.New("x-llm-priority must be critical, standard or batch")
)

// httpError is the client-facing form of an error: the one place where
// error kinds become HTTP statuses and OpenAI-style bodies.
type httpError struct {
	Status     int
	Type       string // OpenAI error "type"
	Code       string // OpenAI error "code"
	Param      string
	Message    string
	RetryAfter time.Duration
	// Dropped is x-llm-d-request-dropped-reason, on every 429 and 503 the
	// router generates: llm-d's reason where it has one.
	Dropped string
}

// classify maps any error from parsing or scheduling to its HTTP form.
func classify(err error) httpError {
	e := httpError{Message: err.Error()}
	var pe *paramError
	if errors.As(err, &pe) {
		e.Param = pe.Param
		e.Message = pe.Msg
	}
	switch {
	case errors.Is(err, ErrUnauthenticated):
		e.Status, e.Type, e.Code = 401, "invalid_request_error", "invalid_api_key"
		e.Message = "Incorrect or missing API key. Send it as Authorization: Bearer <key>."
	case errors.Is(err, ErrBadPriority):
		e.Status, e.Type, e.Code = 400, "invalid_request_error", "invalid_priority"
	case errors.Is(err, ErrBadFairnessID):
		e.Status, e.Type, e.Code = 400, "invalid_request_error", "invalid_fairness_id"
	case errors.Is(err, ErrBadSLO):
		e.Status, e.Type, e.Code = 400, "invalid_request_error", "invalid_slo"
	case errors.Is(err, ErrBadRequest):
		e.Status, e.Type, e.Code = 400, "invalid_request_error", "invalid_request"
	case errors.Is(err, scheduler.ErrUnknownModel):
		e.Status, e.Type, e.Code, e.Param = 404, "invalid_request_error", "model_not_found", "model"
		var me *scheduler.ModelError
		if errors.As(err, &me) {
			e.Message = "The model " + strconv.Quote(me.Model) + " does not exist or no worker serves it."
		}
	case errors.Is(err, ErrTooLarge):
		e.Status, e.Type, e.Code = 413, "invalid_request_error", "request_too_large"
	case errors.Is(err, ErrNotFound):
		e.Status, e.Type, e.Code = 404, "invalid_request_error", "unknown_url"
	case errors.Is(err, ErrMethod):
		e.Status, e.Type, e.Code = 405, "invalid_request_error", "method_not_allowed"
	case errors.Is(err, scheduler.ErrNoHealthyWorker):
		e.Status, e.Type, e.Code = 503, "service_unavailable", "no_healthy_worker"
	case errors.Is(err, scheduler.ErrAtCapacity):
		e.Status, e.Type, e.Code = 429, "rate_limit_exceeded", "at_capacity"
	case errors.Is(err, scheduler.ErrQueueFull):
		e.Status, e.Type, e.Code = 429, "rate_limit_exceeded", "queue_full"
	case errors.Is(err, scheduler.ErrShed):
		e.Status, e.Type, e.Code = 429, "rate_limit_exceeded", "shed"
	case errors.Is(err, scheduler.ErrObjectiveUnmet):
		e.Status, e.Type, e.Code = 429, "rate_limit_exceeded", "slo_unattainable"
		e.Message = "No worker can serve the request within its latency objectives now: " + err.Error()
	case errors.Is(err, scheduler.ErrAdapterLoad):
		// The message carries the engine's reason.
		e.Status, e.Type, e.Code = 503, "service_unavailable", "adapter_load_failed"
	case errors.Is(err, scheduler.ErrQueueTimeout):
		e.Status, e.Type, e.Code = 503, "service_unavailable", "queue_timeout"
	case errors.Is(err, ErrUnavailable):
		e.Status, e.Type, e.Code = 503, "service_unavailable", "shutting_down"
	default:
		e.Status, e.Type, e.Code = 500, "server_error", "internal_error"
		e.Message = "internal router error"
	}
	e.Dropped = droppedReasons[e.Code]
	e.RetryAfter = scheduler.RetryAfterOf(err)
	if e.RetryAfter == 0 && (e.Status == 429 || e.Status == 503) {
		e.RetryAfter = time.Second
	}
	return e
}

// droppedReasons names each 429 and 503 in llm-d's terms
// (llm-d-router pkg/common/error: rejected-saturated, rejected-ttl-expired,
// rejected-shutting-down); a refusal llm-d has no word for keeps the
// router's code after "rejected-".
var droppedReasons = map[string]string{
	"at_capacity":         "rejected-saturated",
	"queue_full":          "rejected-saturated",
	"shed":                "rejected-saturated",
	"slo_unattainable":    "rejected-saturated",
	"queue_timeout":       "rejected-ttl-expired",
	"shutting_down":       "rejected-shutting-down",
	"no_healthy_worker":   "rejected-no-healthy-worker",
	"adapter_load_failed": "rejected-adapter-load-failed",
}

// body renders the OpenAI error object.
func (e httpError) body() []byte {
	type inner struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	in := inner{Message: e.Message, Type: e.Type, Code: e.Code}
	if e.Param != "" {
		in.Param = &e.Param
	}
	b, _ := json.Marshal(struct {
		Error inner `json:"error"`
	}{in})
	return b
}

// immediate builds the ImmediateResponse that answers the client directly.
func (e httpError) immediate(requestID string) *extprocv3.ProcessingResponse {
	headers := []*corev3.HeaderValueOption{
		setHeader("content-type", "application/json"),
		setHeader(headerRequestID, requestID),
	}
	if e.RetryAfter > 0 {
		secs := int(math.Ceil(e.RetryAfter.Seconds()))
		headers = append(headers, setHeader("retry-after", strconv.Itoa(secs)))
	}
	if e.Dropped != "" {
		headers = append(headers, setHeader(headerDropped, e.Dropped))
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
				Headers: &extprocv3.HeaderMutation{SetHeaders: headers},
				Body:    e.body(),
				Details: "llm_router_" + e.Code,
			},
		},
	}
}

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// immediateOK answers the client directly with a 200 JSON body.
func immediateOK(body []byte, requestID string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_OK},
				Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					setHeader("content-type", "application/json"),
					setHeader(headerRequestID, requestID),
				}},
				Body: body,
				// Named, so that Envoy's local-reply mappers (which turn
				// Envoy's own replies into OpenAI errors) leave it alone.
				Details: "llm_router_ok",
			},
		},
	}
}
