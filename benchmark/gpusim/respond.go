package gpusim

// responder renders the response of one inference request in the shape of
// its endpoint.
type responder struct {
	kind    apiKind
	id      string
	created int64
	req     parsedRequest
	// kv is what a prefill-only request's response tells the decode
	// worker; nil otherwise.
	kv *KVTransferParams
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
	// ITL is --stream-summary's inter-token gaps in µs, on the usage chunk;
	// a pointer so that one token's empty list still shows as [] while
	// the other chunks omit the field.
	ITL *[]int64 `json:"gpusim_itl_us,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        *delta  `json:"delta,omitempty"` // chat
	Text         *string `json:"text,omitempty"`  // completions
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

type llamaChunk struct {
	Content         string `json:"content"`
	Stop            bool   `json:"stop"`
	Model           string `json:"model,omitempty"`
	TokensPredicted int    `json:"tokens_predicted,omitempty"`
	TokensEvaluated int    `json:"tokens_evaluated,omitempty"`
	StopType        string `json:"stop_type,omitempty"`
	// ITL is --stream-summary's inter-token gaps in µs, on the last chunk
	// (llama.cpp has no usage chunk).
	ITL *[]int64 `json:"gpusim_itl_us,omitempty"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type fullChoice struct {
	Index        int      `json:"index"`
	Message      *message `json:"message,omitempty"` // chat
	Text         *string  `json:"text,omitempty"`    // completions
	FinishReason string   `json:"finish_reason"`
}

type fullResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []fullChoice `json:"choices"`
	Usage   usage        `json:"usage"`
	// KVTransfer answers a prefill-only request (kvparams.go).
	KVTransfer *KVTransferParams `json:"kv_transfer_params,omitempty"`
}

func (r responder) chunk(choices []chunkChoice) chunk {
	obj := "chat.completion.chunk"
	if r.kind == kindCompletion {
		obj = "text_completion"
	}
	return chunk{ID: r.id, Object: obj, Created: r.created, Model: r.req.Model, Choices: choices}
}

// tokenEvent is the SSE event carrying one token; the first chat event also
// carries the assistant role, as OpenAI's first chunk does.
func (r responder) tokenEvent(first bool) []byte { return r.textEvent(tokenText, first) }

// textEvent is the SSE event carrying text (one token or several).
func (r responder) textEvent(text string, first bool) []byte {
	switch r.kind {
	case kindLlama:
		return sseEvent(llamaChunk{Content: text})
	case kindChat:
		d := &delta{Content: text}
		if first {
			d.Role = "assistant"
		}
		return sseEvent(r.chunk([]chunkChoice{{Delta: d}}))
	default:
		return sseEvent(r.chunk([]chunkChoice{{Text: &text}}))
	}
}

// endEvents are the events after the last token: the finish reason, the
// usage chunk when asked for, and the terminator. With itl (the summary
// stream's inter-token gaps, not nil even when empty) the usage chunk is
// always sent and carries them.
func (r responder) endEvents(n int, itl []int64) [][]byte {
	if r.kind == kindLlama {
		c := r.llama(n, "")
		if itl != nil {
			c.ITL = &itl
		}
		return [][]byte{sseEvent(c)}
	}
	reason := r.req.StopReason
	c := chunkChoice{FinishReason: &reason}
	if r.kind == kindChat {
		c.Delta = &delta{}
	} else {
		empty := ""
		c.Text = &empty
	}
	out := [][]byte{sseEvent(r.chunk([]chunkChoice{c}))}
	if r.req.includeUsage || itl != nil {
		u := newUsage(r.req.PromptTokens, n)
		ch := r.chunk([]chunkChoice{})
		ch.Usage = &u
		if itl != nil {
			ch.ITL = &itl
		}
		out = append(out, sseEvent(ch))
	}
	return append(out, []byte("data: [DONE]\n\n"))
}

func (r responder) llama(n int, content string) llamaChunk {
	stopType := "eos"
	if r.req.StopReason == "length" {
		stopType = "limit"
	}
	return llamaChunk{
		Content: content, Stop: true, Model: r.req.Model,
		TokensPredicted: n, TokensEvaluated: r.req.PromptTokens, StopType: stopType,
	}
}

// whole is the non-streamed response body for n generated tokens.
func (r responder) whole(n int) any {
	text := tokensText(n)
	if r.kind == kindLlama {
		return r.llama(n, text)
	}
	c := fullChoice{FinishReason: r.req.StopReason}
	obj := "chat.completion"
	if r.kind == kindChat {
		c.Message = &message{Role: "assistant", Content: text}
	} else {
		obj = "text_completion"
		c.Text = &text
	}
	return fullResponse{
		ID: r.id, Object: obj, Created: r.created, Model: r.req.Model,
		Choices: []fullChoice{c}, Usage: newUsage(r.req.PromptTokens, n), KVTransfer: r.kv,
	}
}
