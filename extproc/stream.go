package extproc

import (
	"bytes"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// maxLine bounds a buffered partial SSE line; longer lines are skipped, not
// buffered without limit.
const maxLine = 1 << 20

// streamObserver watches a streamed (SSE) response go by without changing
// it: when the first content token arrives, how many tokens follow, and
// whether the stream reached its end marker.
type streamObserver struct {
	claimedAt time.Time
	partial   []byte
	skipping  bool

	first, last time.Time
	deltas      int // content-bearing events
	usageTokens int // completion_tokens from a usage chunk, if any
	usagePrompt int // prompt_tokens from a usage chunk, if any
	done        bool
}

func newStreamObserver(claimedAt time.Time) *streamObserver {
	return &streamObserver{claimedAt: claimedAt}
}

// observe consumes one body chunk received at now.
func (o *streamObserver) observe(chunk []byte, now time.Time) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if !o.skipping && len(o.partial)+len(chunk) <= maxLine {
				o.partial = append(o.partial, chunk...)
			} else {
				o.skipping, o.partial = true, o.partial[:0]
			}
			return
		}
		line := chunk[:i]
		if len(o.partial) > 0 {
			line = append(o.partial, line...)
			o.partial = o.partial[:0]
		}
		if !o.skipping {
			o.line(bytes.TrimRight(line, "\r"), now)
		}
		o.skipping = false
		chunk = chunk[i+1:]
	}
}

func (o *streamObserver) line(line []byte, now time.Time) {
	payload, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	payload = bytes.TrimSpace(payload)
	if bytes.Equal(payload, []byte("[DONE]")) {
		o.done = true
		return
	}
	if !gjson.ValidBytes(payload) {
		return
	}
	// OpenAI chat (delta.content), completions (text), llama.cpp (content).
	res := gjson.GetManyBytes(payload, "choices.0.delta.content", "choices.0.text", "content", "usage.completion_tokens", "stop", "usage.prompt_tokens")
	if res[0].String() != "" || res[1].String() != "" || res[2].String() != "" {
		if o.deltas == 0 {
			o.first = now
		}
		o.deltas++
		o.last = now
	}
	if res[3].Exists() {
		o.usageTokens = int(res[3].Int())
	}
	if res[5].Exists() {
		o.usagePrompt = int(res[5].Int())
	}
	if res[4].Type == gjson.True { // llama.cpp's final event
		o.done = true
	}
}

// ttft is the time from the claim to the first content token, once it
// arrived.
func (o *streamObserver) ttft() (time.Duration, bool) {
	if o.deltas == 0 {
		return 0, false
	}
	return o.first.Sub(o.claimedAt), true
}

// result returns TTFT (from the claim), the decode rate and the completion
// tokens (the worker's usage when sent, else the counted deltas).
func (o *streamObserver) result() (ttft time.Duration, tps float64, tokens int) {
	tokens = o.deltas
	if o.usageTokens > 0 {
		tokens = o.usageTokens
	}
	if o.deltas == 0 {
		return 0, 0, tokens
	}
	ttft = o.first.Sub(o.claimedAt)
	if span := o.last.Sub(o.first).Seconds(); span > 0 && tokens > 1 {
		tps = float64(tokens-1) / span
	}
	return ttft, tps, tokens
}

// usageStripper removes from a streamed response what the router added by
// asking for usage: the usage-only event (empty choices) and "usage":null
// fields, so a client that did not ask for usage receives exactly what it
// would have without the router. It passes complete events through at once
// and holds only an incomplete trailing event until its end arrives.
type usageStripper struct {
	carry []byte
}

func (u *usageStripper) filter(chunk []byte, eos bool) []byte {
	data := append(u.carry, chunk...)
	out := make([]byte, 0, len(data))
	for {
		i := bytes.Index(data, []byte("\n\n"))
		if i < 0 {
			break
		}
		out = append(out, stripUsage(data[:i+2])...)
		data = data[i+2:]
	}
	if eos {
		out = append(out, stripUsage(data)...)
		data = nil
	}
	u.carry = append([]byte(nil), data...)
	return out
}

// stripUsage drops a usage-only event and removes "usage":null from others.
func stripUsage(ev []byte) []byte {
	if !bytes.Contains(ev, []byte(`"usage"`)) {
		return ev
	}
	line, rest, _ := bytes.Cut(ev, []byte("\n"))
	payload, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return ev
	}
	payload = bytes.TrimSpace(payload)
	if !gjson.ValidBytes(payload) {
		return ev
	}
	choices, usage := gjson.GetBytes(payload, "choices"), gjson.GetBytes(payload, "usage")
	switch {
	case usage.IsObject() && choices.IsArray() && len(choices.Array()) == 0:
		return nil // the usage chunk the client did not ask for
	case usage.Type == gjson.Null && usage.Exists():
		cleaned, err := sjson.DeleteBytes(payload, "usage")
		if err != nil {
			return ev
		}
		out := append([]byte("data: "), cleaned...)
		out = append(out, '\n')
		return append(out, rest...)
	}
	return ev
}
