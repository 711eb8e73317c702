// Package loadgen generates the benchmark's load: the workload (a trace's
// requests, their arrivals and prompts), clients that measure what users
// feel (TTFT, inter-token latency, end-to-end latency, tokens/s), and the
// open- and closed-loop drivers that send it.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request is one request to send.
type Request struct {
	Model        string
	MaxTokens    int
	PromptTokens int // used to size the prompt and told to gpusim
	// Content is the prompt text; empty: filler of PromptTokens tokens.
	Content string
	// OutputTokens, when positive, is the length gpusim generates
	// (gpusim_output_tokens): the trace's true length, whatever MaxTokens
	// says. MaxTokens 0 sends no max_tokens.
	OutputTokens int
	Stream       bool
	Priority     string // x-llm-priority, when set
	FairnessID   string // x-llm-fairness-id, when set
	// Body overrides the generated JSON body when set.
	Body []byte
	// onFirstToken, when set, is called once the first token arrives.
	onFirstToken func()
}

// Result is what one request measured.
type Result struct {
	Start   time.Duration // since the run started
	Latency time.Duration // end to end
	TTFT    time.Duration // streams: to the first content token
	ITLMax  time.Duration // streams: the longest gap between tokens
	ITLs    []time.Duration
	Tokens  int
	Status  int
	Node    string // x-routed-node
	Err     string
	// Cut marks a request cancelled by the harness at the end of a run,
	// still unfinished: its latencies are lower bounds.
	Cut bool
}

// OK reports a 200 that completed.
func (r Result) OK() bool { return r.Err == "" && r.Status == http.StatusOK }

// TokensPerSecond is the request's decode rate after its first token.
func (r Result) TokensPerSecond() float64 {
	if r.Tokens < 2 || r.Latency <= r.TTFT {
		return 0
	}
	return float64(r.Tokens-1) / (r.Latency - r.TTFT).Seconds()
}

// Client sends OpenAI chat requests and measures them.
type Client struct {
	base   string
	http   *http.Client
	apiKey string
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8080) keeping
// up to conns connections alive.
func NewClient(base string, conns int, apiKey string) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{base: strings.TrimSuffix(base, "/"), http: &http.Client{Transport: tr}, apiKey: apiKey}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Body renders the request's JSON: a prompt of about PromptTokens tokens
// (four characters each) and gpusim's prompt-size hint.
func (r Request) body() []byte {
	if r.Body != nil {
		return r.Body
	}
	n := r.PromptTokens
	if n < 1 {
		n = 8
	}
	prompt := r.Content
	if prompt == "" {
		prompt = strings.TrimSpace(strings.Repeat("word ", n))
	}
	var b bytes.Buffer
	b.Grow(len(prompt) + 256)
	fmt.Fprintf(&b, `{"model":%q,"messages":[{"role":"user","content":%q}],"stream":%v,"gpusim_prompt_tokens":%d`,
		r.Model, prompt, r.Stream, n)
	if r.MaxTokens > 0 {
		fmt.Fprintf(&b, `,"max_tokens":%d`, r.MaxTokens)
	}
	if r.OutputTokens > 0 {
		fmt.Fprintf(&b, `,"gpusim_output_tokens":%d`, r.OutputTokens)
	}
	if r.Stream {
		b.WriteString(`,"stream_options":{"include_usage":true}`)
	}
	b.WriteString("}")
	return b.Bytes()
}

// Do sends r and measures it; the result's Start is relative to epoch.
func (c *Client) Do(ctx context.Context, r Request, epoch time.Time) Result {
	start := time.Now()
	res := Result{Start: start.Sub(epoch)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/chat/completions", bytes.NewReader(r.body()))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if r.Priority != "" {
		req.Header.Set("x-llm-priority", r.Priority)
	}
	if r.FairnessID != "" {
		req.Header.Set("x-llm-fairness-id", r.FairnessID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		res.Err = err.Error()
		res.Latency = time.Since(start)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	res.Node = resp.Header.Get("x-routed-node")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, err = io.Copy(io.Discard, resp.Body)
		res.Latency = time.Since(start)
		if err != nil {
			res.Err = err.Error()
		}
		if res.Status == http.StatusOK {
			res.Tokens = r.MaxTokens
			if r.OutputTokens > 0 {
				res.Tokens = r.OutputTokens
			}
		}
		return res
	}
	c.readStream(resp.Body, start, &res, r.onFirstToken)
	res.Latency = time.Since(start)
	return res
}

// readStream reads SSE events, timing every content-bearing one.
func (c *Client) readStream(body io.Reader, start time.Time, res *Result, onFirst func()) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var last time.Time
	var engine []time.Duration
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		payload, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		payload = bytes.TrimSpace(payload)
		if bytes.Equal(payload, []byte("[DONE]")) {
			done = true
			continue
		}
		if gaps, ok := engineGaps(payload); ok {
			engine = gaps
			continue
		}
		if !bytes.Contains(payload, []byte(`"content":"`)) && !bytes.Contains(payload, []byte(`"text":"`)) {
			continue
		}
		if bytes.Contains(payload, []byte(`"content":""`)) {
			continue
		}
		now := time.Now()
		// gpusim's summary streams carry many tokens in one event.
		k := max(1, bytes.Count(payload, []byte(gpusimToken)))
		if res.Tokens == 0 {
			res.TTFT = now.Sub(start)
			if onFirst != nil {
				onFirst()
			}
		} else {
			gap := now.Sub(last)
			res.ITLs = append(res.ITLs, gap)
			if gap > res.ITLMax {
				res.ITLMax = gap
			}
		}
		last = now
		res.Tokens += k
	}
	if engine != nil {
		res.ITLs, res.ITLMax = engine, 0
		for _, g := range engine {
			res.ITLMax = max(res.ITLMax, g)
		}
	}
	if err := sc.Err(); err != nil {
		res.Err = err.Error()
	} else if !done {
		res.Err = "stream ended without [DONE]"
	}
}

// gpusimToken is the text of one simulated token.
const gpusimToken = "tok "

// engineGaps reads the inter-token gaps a gpusim summary stream reports
// in its usage event (gpusim --stream-summary): the engine's own clock,
// since the stream itself sends the tokens after the first in one event.
func engineGaps(payload []byte) ([]time.Duration, bool) {
	const key = `"gpusim_itl_us":[`
	i := bytes.Index(payload, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := payload[i+len(key):]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return nil, false
	}
	gaps := make([]time.Duration, 0, bytes.Count(rest[:end], []byte(","))+1)
	for _, f := range bytes.Split(rest[:end], []byte(",")) {
		if len(f) == 0 {
			continue
		}
		us, err := strconv.ParseInt(string(bytes.TrimSpace(f)), 10, 64)
		if err != nil {
			return nil, false
		}
		gaps = append(gaps, time.Duration(us)*time.Microsecond)
	}
	return gaps, true
}

// SizedRequest is a chat request whose JSON body is about bytes long (to
// within the five bytes of one prompt word), rendered once: every request
// of a step is identical.
func SizedRequest(bytes, maxTokens int) Request {
	r := Request{Model: "bench", MaxTokens: maxTokens, PromptTokens: 1}
	fixed := len(r.body()) - len("word")
	r.PromptTokens = max((bytes-fixed+1)/5, 1)
	r.Body = r.body()
	return r
}
