package extproc

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// Endpoint is an inference API the router schedules.
type Endpoint int

// Supported endpoints.
const (
	EndpointNone Endpoint = iota
	EndpointChat
	EndpointCompletions
	EndpointEmbeddings
	EndpointLlamaCompletion // llama.cpp's native POST /completion
)

// endpointFor maps a request path (query string stripped) to an endpoint.
func endpointFor(path string) Endpoint {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch strings.TrimSuffix(path, "/") {
	case "/v1/chat/completions":
		return EndpointChat
	case "/v1/completions":
		return EndpointCompletions
	case "/v1/embeddings":
		return EndpointEmbeddings
	case "/completion":
		return EndpointLlamaCompletion
	}
	return EndpointNone
}

// Body is what the router reads from a request body. Nothing else is
// decoded: messages and prompts are only measured, never unmarshalled.
type Body struct {
	Model        string
	MaxTokens    int // 0: not given (or n_predict -1, unlimited)
	Stream       bool
	PromptTokens int // estimate: bytes of the prompt field / 4
	IncludeUsage bool
	// Blocks are the prompt's chained block hashes (scoring/prefix): for
	// chat, each message's raw "role" then raw "content" JSON in order; for
	// completions, the raw "prompt" JSON; none for embeddings. At most
	// MaxPromptBlocks; nil when the prompt is shorter than one block.
	Blocks []uint64
}

// MaxPromptBlocks bounds the block hashes kept for one request: 8192 blocks
// of 64 bytes cover the first 512 KiB (about 131k tokens) of a prompt,
// beyond any context window we serve, in at most 64 KiB of hashes. Bytes
// past it are counted, not hashed.
const MaxPromptBlocks = 8192

// ErrBadRequest marks a malformed request body.
var ErrBadRequest = errors.New("invalid request")

// paramError is a 400 that names the offending field (or header), as
// OpenAI does.
type paramError struct {
	Param string
	Msg   string
	Kind  error // the error kind; nil: ErrBadRequest
}

func (e *paramError) Error() string { return e.Msg }

func (e *paramError) Unwrap() error {
	if e.Kind != nil {
		return e.Kind
	}
	return ErrBadRequest
}

func badParam(param, format string, a ...any) error {
	return &paramError{Param: param, Msg: fmt.Sprintf(format, a...)}
}

// parseBody validates raw as a JSON object and extracts the fields the
// router needs. defaultModel is used when an endpoint allows no model
// (llama.cpp's /completion) and the body has none.
func parseBody(ep Endpoint, raw []byte, defaultModel string) (Body, error) {
	if len(raw) == 0 {
		return Body{}, badParam("", "request body is empty; expected a JSON object")
	}
	if !gjson.ValidBytes(raw) {
		return Body{}, badParam("", "request body is not valid JSON")
	}
	// gjson.ParseBytes would copy the whole body into a string first (a
	// quarter of an exchange's CPU at 256 KB): read it in place instead.
	// Nothing writes to a request body once Envoy's message is decoded, and
	// the one string kept past this exchange (the model) is cloned.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw))) //nolint:gosec // G103: read-only view of an immutable body, see above
	if !root.IsObject() {
		return Body{}, badParam("", "request body must be a JSON object")
	}
	var model, maxTokens, maxCompletion, nPredict, stream, messages, prompt, input, includeUsage gjson.Result
	// One pass over the top-level keys; nested values are skipped, not parsed.
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			model = v
		case "max_tokens":
			maxTokens = v
		case "max_completion_tokens":
			maxCompletion = v
		case "n_predict":
			nPredict = v
		case "stream":
			stream = v
		case "messages":
			messages = v
		case "prompt":
			prompt = v
		case "input":
			input = v
		case "stream_options":
			includeUsage = v.Get("include_usage")
		}
		return true
	})

	var b Body
	switch {
	case model.Type == gjson.String && strings.TrimSpace(model.Str) != "":
		b.Model = strings.Clone(model.Str) // the decision log keeps it: do not pin the body
	case model.Exists() && model.Type != gjson.String:
		return Body{}, badParam("model", "'model' must be a string")
	case ep == EndpointLlamaCompletion && defaultModel != "":
		b.Model = defaultModel
	default:
		return Body{}, badParam("model", "you must provide a model parameter")
	}

	var err error
	switch {
	case maxCompletion.Exists() && maxCompletion.Type != gjson.Null:
		b.MaxTokens, err = tokenCount("max_completion_tokens", maxCompletion, false)
	case maxTokens.Exists() && maxTokens.Type != gjson.Null:
		b.MaxTokens, err = tokenCount("max_tokens", maxTokens, false)
	case nPredict.Exists() && nPredict.Type != gjson.Null:
		b.MaxTokens, err = tokenCount("n_predict", nPredict, true)
	}
	if err != nil {
		return Body{}, err
	}

	if stream.Exists() && stream.Type != gjson.Null {
		if stream.Type != gjson.True && stream.Type != gjson.False {
			return Body{}, badParam("stream", "'stream' must be a boolean")
		}
		b.Stream = stream.Type == gjson.True
	}
	if ep == EndpointEmbeddings && b.Stream {
		return Body{}, badParam("stream", "embeddings cannot be streamed")
	}
	b.IncludeUsage = includeUsage.Type == gjson.True

	switch ep {
	case EndpointChat:
		if !messages.IsArray() {
			return Body{}, badParam("messages", "'messages' must be an array")
		}
		b.PromptTokens = estimateTokens(messages.Raw)
		b.Blocks = chatBlocks(messages)
	case EndpointCompletions, EndpointLlamaCompletion:
		if !prompt.Exists() {
			return Body{}, badParam("prompt", "'prompt' is required")
		}
		b.PromptTokens = estimateTokens(prompt.Raw)
		h := prefix.Hasher{Max: MaxPromptBlocks}
		h.Grow(len(prompt.Raw))
		h.WriteString(prompt.Raw)
		b.Blocks = blocksOrNil(&h)
	case EndpointEmbeddings:
		if !input.Exists() {
			return Body{}, badParam("input", "'input' is required")
		}
		b.PromptTokens = estimateTokens(input.Raw)
	}
	return b, nil
}

// chatBlocks hashes each message's raw role then raw content, in order.
// The top-level walk only skipped over the array; this walks into it once.
// Every Raw is a slice of the parsed body, so the only allocation is the
// hash slice, sized up front from the array's length.
func chatBlocks(messages gjson.Result) []uint64 {
	h := prefix.Hasher{Max: MaxPromptBlocks}
	h.Grow(len(messages.Raw))
	messages.ForEach(func(_, m gjson.Result) bool {
		var role, content gjson.Result
		m.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "role":
				role = v
			case "content":
				content = v
			}
			return true
		})
		h.WriteString(role.Raw)
		h.WriteString(content.Raw)
		return true
	})
	return blocksOrNil(&h)
}

func blocksOrNil(h *prefix.Hasher) []uint64 {
	if len(h.Blocks()) == 0 {
		return nil
	}
	return h.Blocks()
}

// tokenCount reads a non-negative integer token limit. allowUnlimited
// accepts llama.cpp's -1 ("until the end of context") as unknown.
func tokenCount(param string, v gjson.Result, allowUnlimited bool) (int, error) {
	if v.Type != gjson.Number {
		return 0, badParam(param, "'%s' must be an integer", param)
	}
	f := v.Float()
	if f != float64(int64(f)) {
		return 0, badParam(param, "'%s' must be an integer", param)
	}
	n := int64(f)
	switch {
	case allowUnlimited && n == -1:
		return 0, nil
	case n < 0:
		return 0, badParam(param, "'%s' must be at least 0", param)
	case n > 1<<24:
		return 0, badParam(param, "'%s' is too large", param)
	}
	return int(n), nil
}

// estimateTokens approximates prompt tokens from the raw JSON size of the
// prompt field: about four bytes a token for English text. It is only a
// job-cost input; the worker reports the true count in usage.
func estimateTokens(raw string) int {
	if raw == "" {
		return 0
	}
	return (len(raw) + 3) / 4
}
