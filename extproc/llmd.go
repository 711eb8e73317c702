package extproc

import (
	"encoding/binary"
	"hash/fnv"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/llm-router/llm-router/state"
)

// The request headers llm-d's router reads (llm-d-router
// pkg/epp/metadata/consts.go), each with its deprecated x-gateway-* alias,
// so that clients and gateways written for llm-d work unchanged. Every one
// stays within what the client's key allows: an objective's priority is
// clamped to the key's, a rewritten model must be one the router serves,
// and a session belongs to the key's tenant.
const (
	headerObjective      = "x-llm-d-inference-objective"
	headerObjectiveAlias = "x-gateway-inference-objective"
	headerRewrite        = "x-llm-d-model-name-rewrite"
	headerRewriteAlias   = "x-gateway-model-name-rewrite"
	headerSession        = "x-session-id"
	// headerDropped names why the router refused a request (429 or 503), in
	// llm-d's words where llm-d has them.
	headerDropped = "x-llm-d-request-dropped-reason"
)

// llmdRequest is what the llm-d headers asked of one request.
type llmdRequest struct {
	objective string
	rewrite   string
	session   string
}

// read takes key's value if it is one of the llm-d headers; the current
// name wins over its alias.
func (l *llmdRequest) read(key, value string) {
	value = strings.TrimSpace(value)
	switch key {
	case headerObjective:
		l.objective = value
	case headerObjectiveAlias:
		if l.objective == "" {
			l.objective = value
		}
	case headerRewrite:
		l.rewrite = value
	case headerRewriteAlias:
		if l.rewrite == "" {
			l.rewrite = value
		}
	case headerSession:
		l.session = value
	}
}

// priority is the priority the request asks for: x-llm-priority when set,
// else its objective's (an objective the configuration does not name is
// ignored, as llm-d treats an objective with no InferenceObjective: the
// default priority). auth.Priority then lowers it to the key's maximum.
func (l *llmdRequest) priority(header string, objectives map[string]state.Priority) string {
	if header != "" || l.objective == "" {
		return header
	}
	return string(objectives[l.objective])
}

// rewriteModel returns raw with its model replaced as the request asked,
// or raw unchanged.
func (l *llmdRequest) rewriteModel(raw []byte) ([]byte, error) {
	if l.rewrite == "" {
		return raw, nil
	}
	return sjson.SetBytes(raw, "model", l.rewrite)
}

// sessionBlockCount is how many blocks stand for a session: one stride of
// the prefix index, so the session is recorded and matched like a prompt
// prefix of that length.
const sessionBlockCount = state.IndexStride

// sessionBlocks puts the session ahead of the prompt's blocks. The prefix
// index then records the session on every worker that serves it, in the
// store every replica shares, and a later request of the same session
// prefers the workers that served it ("sticky until saturated", as prompt
// prefixes are). The session is the tenant's: another key's requests with
// the same id do not match it. The cost: a prompt shared across sessions
// no longer draws them to the same worker.
func sessionBlocks(tenant, session string, blocks []uint64) []uint64 {
	if session == "" {
		return blocks
	}
	out := make([]uint64, 0, sessionBlockCount+len(blocks))
	h := fnv.New64a()
	_, _ = h.Write([]byte(tenant))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(session))
	for i := range sessionBlockCount {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		_, _ = h.Write(b[:])
		out = append(out, h.Sum64())
	}
	return append(out, blocks...)
}
