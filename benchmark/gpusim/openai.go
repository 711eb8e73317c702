package gpusim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// API shapes of the inference endpoints.
type apiKind uint8

const (
	kindChat       apiKind = iota // POST /v1/chat/completions
	kindCompletion                // POST /v1/completions
	kindLlama                     // POST /completion (llama.cpp native)
)

const (
	defaultMaxTokens = 16
	maxMaxTokens     = 8192
	maxBodyBytes     = 64 << 20
	tokenText        = "tok "
)

// Request outcomes decided by the HTTP layer.
var (
	errUnknownModel = errors.New("model not found")
	errInjected     = errors.New("simulated server failure")
	errLoading      = errors.New("loading model")
)

// inferenceRequest is the union of the fields gpusim reads from the three
// request shapes; everything else is ignored.
type inferenceRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	NPredict            *int            `json:"n_predict"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// PromptTokens overrides the prompt-length estimate (trace replays).
	PromptTokens *int `json:"gpusim_prompt_tokens"`
	// OutputTokens is the true output length (trace replays): the request
	// stops there, as a model emitting end-of-sequence would.
	OutputTokens *int `json:"gpusim_output_tokens"`
	// KVTransfer is vLLM's disaggregated-serving field (kvparams.go).
	KVTransfer *KVTransferParams `json:"kv_transfer_params"`
}

// chatMessage keeps role and content raw: their bytes as sent are what the
// prefix cache hashes, so no decoding and re-encoding may change them.
type chatMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parsedRequest is what an inference handler needs after parsing.
type parsedRequest struct {
	Request
	stream       bool
	includeUsage bool
	kv           *KVTransferParams
}

// parseInference decodes and checks the body of an inference request.
// Prompt tokens are estimated as characters / 4 (at least 1). The prompt's
// block hashes are those of scoring/prefix: the raw JSON of each chat
// message's role then content, or of the completion prompt.
func parseInference(kind apiKind, w http.ResponseWriter, r *http.Request, models []string) (parsedRequest, error) {
	var in inferenceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(&in); err != nil {
		return parsedRequest{}, fmt.Errorf("%w: body: %w", ErrBadRequest, err)
	}
	p := parsedRequest{stream: in.Stream, kv: in.KVTransfer}
	p.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage

	switch kind {
	case kindLlama:
		p.Model = models[0] // llama-server serves one model whatever the body says
	default:
		if in.Model == "" {
			return p, fmt.Errorf("%w: model is required", ErrBadRequest)
		}
		if !slices.Contains(models, in.Model) {
			return p, fmt.Errorf("%w: the model `%s` does not exist", errUnknownModel, in.Model)
		}
		p.Model = in.Model
	}

	chars := 0
	var err error
	var h prefix.Hasher
	switch kind {
	case kindChat:
		if len(in.Messages) == 0 {
			return p, fmt.Errorf("%w: messages is required", ErrBadRequest)
		}
		for _, m := range in.Messages {
			n, err := contentChars(m.Content)
			if err != nil {
				return p, fmt.Errorf("%w: message content: %w", ErrBadRequest, err)
			}
			chars += n
			if len(m.Role) > 0 && m.Role[0] != '"' && string(m.Role) != "null" {
				return p, fmt.Errorf("%w: message role must be a string", ErrBadRequest)
			}
			h.Write(m.Role)
			h.Write(m.Content)
		}
	default:
		if chars, err = promptChars(in.Prompt); err != nil {
			return p, fmt.Errorf("%w: prompt: %w", ErrBadRequest, err)
		}
		h.Write(in.Prompt)
	}
	p.Blocks = h.Blocks()
	p.PromptTokens = max(1, chars/4)
	if in.PromptTokens != nil {
		if *in.PromptTokens < 1 {
			return p, fmt.Errorf("%w: gpusim_prompt_tokens must be >= 1", ErrBadRequest)
		}
		p.PromptTokens = *in.PromptTokens
	}

	limit := in.MaxTokens
	if in.MaxCompletionTokens != nil {
		limit = in.MaxCompletionTokens
	}
	if kind == kindLlama {
		limit = nil
		if in.NPredict != nil && *in.NPredict > 0 { // -1 means unlimited
			limit = in.NPredict
		}
	}
	p.MaxTokens, p.StopReason = defaultMaxTokens, "stop"
	if limit != nil {
		if *limit < 1 {
			return p, fmt.Errorf("%w: max_tokens must be >= 1", ErrBadRequest)
		}
		p.MaxTokens, p.StopReason = min(*limit, maxMaxTokens), "length"
	}
	if out := in.OutputTokens; out != nil {
		if *out < 1 {
			return p, fmt.Errorf("%w: gpusim_output_tokens must be >= 1", ErrBadRequest)
		}
		// The model stops by itself after *out tokens unless the limit
		// (or gpusim's own cap) cuts it short first.
		if limit == nil || *out <= *limit {
			p.MaxTokens, p.StopReason = min(*out, maxMaxTokens), "stop"
			if *out > maxMaxTokens {
				p.StopReason = "length"
			}
		}
	}
	return p, nil
}

// contentChars counts the characters of a chat message content: a string or
// an array of parts with text.
func contentChars(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return utf8.RuneCountInString(s), nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return 0, errors.New("want a string or an array of parts")
	}
	n := 0
	for _, p := range parts {
		n += utf8.RuneCountInString(p.Text)
	}
	return n, nil
}

// promptChars counts a completion prompt: a string, an array of strings, or
// token ids (each counted as 4 characters, i.e. one token).
func promptChars(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return utf8.RuneCountInString(s), nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		n := 0
		for _, x := range ss {
			n += utf8.RuneCountInString(x)
		}
		return n, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return 4 * len(ids), nil
	}
	var batches [][]int
	if err := json.Unmarshal(raw, &batches); err != nil {
		return 0, errors.New("want a string, strings or token ids")
	}
	n := 0
	for _, b := range batches {
		n += 4 * len(b)
	}
	return n, nil
}

// errorStatus maps a request outcome to its HTTP status and body; it is the
// only place that does.
func errorStatus(err error) (int, any) {
	type detail struct {
		Message string `json:"message"`
		Type    string `json:"type,omitempty"`
		Code    any    `json:"code"`
	}
	type body struct {
		Error detail `json:"error"`
	}
	switch {
	case errors.Is(err, errLoading):
		// llama-server's body, in its field order.
		type loading struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		return http.StatusServiceUnavailable, map[string]loading{"error": {http.StatusServiceUnavailable, "Loading model", "unavailable_error"}}
	case errors.Is(err, errUnknownModel):
		return http.StatusNotFound, body{detail{err.Error(), "invalid_request_error", "model_not_found"}}
	case errors.Is(err, ErrContextTooLong):
		return http.StatusBadRequest, body{detail{err.Error(), "invalid_request_error", "context_length_exceeded"}}
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, body{detail{err.Error(), "invalid_request_error", "invalid_request"}}
	case errors.Is(err, errInjected):
		return http.StatusServiceUnavailable, body{detail{err.Error(), "server_error", "service_unavailable"}}
	default:
		return http.StatusInternalServerError, body{detail{err.Error(), "server_error", "internal_error"}}
	}
}

// usage is OpenAI's token accounting object.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func newUsage(prompt, completion int) usage {
	return usage{prompt, completion, prompt + completion}
}

// sseEvent frames v as one server-sent event.
func sseEvent(v any) []byte {
	b, _ := json.Marshal(v) // gpusim's own types only: cannot fail
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

func tokensText(n int) string { return strings.Repeat(tokenText, n) }
