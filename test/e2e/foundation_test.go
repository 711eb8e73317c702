package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
)

func threeWorkers(args ...string) []workerSpec {
	return []workerSpec{
		{ID: "a-0", Model: "model-a", Args: args},
		{ID: "a-1", Model: "model-a", Args: args},
		{ID: "b-0", Model: "model-b", Args: args},
	}
}

func (e *env) client() openai.Client {
	return openai.NewClient(
		option.WithBaseURL(e.URL+"/v1/"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
	)
}

func chatParams(model string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something.")},
		MaxTokens: openai.Int(maxTokens),
	}
}

// TestOpenAIClientThroughEnvoy: the official client against the Envoy
// listener; the right model's worker serves and x-routed-node names it;
// streams arrive incrementally.
func TestOpenAIClientThroughEnvoy(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "40", "--ttft-ms", "20"), nil)
	c := e.client()
	ctx := e.ctx

	for _, tc := range []struct {
		model string
		nodes []string
	}{{"model-a", []string{"a-0", "a-1"}}, {"model-b", []string{"b-0"}}} {
		var httpResp *http.Response
		resp, err := c.Chat.Completions.New(ctx, chatParams(tc.model, 4), option.WithResponseInto(&httpResp))
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 4 {
			t.Fatalf("%s: unexpected completion %+v", tc.model, resp)
		}
		node, served := httpResp.Header.Get("x-routed-node"), httpResp.Header.Get("x-gpusim-id")
		if node != served || !contains(tc.nodes, node) {
			t.Fatalf("%s: x-routed-node=%q, served by %q, want one of %v", tc.model, node, served, tc.nodes)
		}
		if httpResp.Header.Get("x-request-id") == "" {
			t.Fatalf("no x-request-id in the response")
		}
	}

	// Streaming: 40 tokens at 40 tok/s take about a second to generate;
	// the first chunk must reach the client long before the last token.
	start := time.Now()
	stream := c.Chat.Completions.NewStreaming(ctx, chatParams("model-a", 40))
	var first time.Duration
	chunks := 0
	var text strings.Builder
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			if chunks == 0 {
				first = time.Since(start)
			}
			chunks++
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	if chunks != 40 {
		t.Fatalf("got %d content chunks, want 40", chunks)
	}
	// The worker needs ~1 s for its 40 tokens; if Envoy or the router
	// buffered the stream, the first chunk would arrive with the last.
	if total < 900*time.Millisecond || first > total/2 {
		t.Fatalf("not incremental: first chunk after %v, whole stream %v", first, total)
	}
	e.waitIdle(5 * time.Second)

	// The streamed request's measurements reached the moving averages.
	snap := e.Router.Scheduler().Snapshot()
	var withTTFT int
	for _, w := range snap.Workers {
		if w.Stats.TTFT.Samples > 0 && w.Stats.TokensPerSec.Samples > 0 {
			withTTFT++
			if tps := w.Stats.TokensPerSec.Value; tps < 20 || tps > 80 {
				t.Errorf("%s: measured %.1f tok/s, gpusim runs 40", w.Spec.ID, tps)
			}
		}
	}
	if withTTFT == 0 {
		t.Fatalf("no worker has TTFT and tokens/s averages after a streamed request")
	}
}

// TestErrorsAreOpenAIShaped: every error case returns its status and an
// OpenAI error body, as the client library surfaces it.
func TestErrorsAreOpenAIShaped(t *testing.T) {
	e := newEnv(t, []workerSpec{
		{ID: "a-0", Model: "model-a", Cap: 1, Args: []string{"--tokens-per-second", "20", "--ttft-ms", "0"}},
		{ID: "b-0", Model: "model-b"},
	}, func(c *config.Config) {
		c.MaxBodyBytes = 64 << 10
		c.Queue.MaxQueueSize = 0 // queueing off: a full fleet answers 429 at once
	})
	c := e.client()
	ctx := e.ctx
	chat := func(body any, opts ...option.RequestOption) error {
		opts = append(opts, option.WithRequestBody("application/json", body))
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{}, opts...)
		return err
	}

	cases := []struct {
		name       string
		body       any
		status     int
		code       string
		retryAfter bool
	}{
		{"malformed JSON", []byte(`{"model": "model-a", "messages": [`), 400, "invalid_request", false},
		{"missing model", []byte(`{"messages": []}`), 400, "invalid_request", false},
		{"model of the wrong type", []byte(`{"model": 7, "messages": []}`), 400, "invalid_request", false},
		{"max_tokens of the wrong type", []byte(`{"model": "model-a", "messages": [], "max_tokens": "many"}`), 400, "invalid_request", false},
		{"stream of the wrong type", []byte(`{"model": "model-a", "messages": [], "stream": "yes"}`), 400, "invalid_request", false},
		{"unknown model", []byte(`{"model": "nope", "messages": []}`), 404, "model_not_found", false},
		{"body over the limit", []byte(`{"model": "model-a", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 70<<10) + `"}]}`), 413, "request_too_large", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAPIError(t, chat(tc.body), tc.status, tc.code, tc.retryAfter)
		})
	}

	t.Run("every eligible worker at its cap", func(t *testing.T) {
		// Hold a-0's only slot with a slow stream, then ask again.
		holdCtx, release := context.WithCancel(ctx)
		defer release()
		stream := c.Chat.Completions.NewStreaming(holdCtx, chatParams("model-a", 200))
		if !stream.Next() {
			t.Fatalf("holding stream did not start: %v", stream.Err())
		}
		checkAPIError(t, chat([]byte(`{"model": "model-a", "messages": [{"role":"user","content":"hi"}], "max_tokens": 1}`)), 429, "at_capacity", true)
		release()
		_ = stream.Close()
		e.waitIdle(5 * time.Second)
	})

	t.Run("no healthy worker", func(t *testing.T) {
		if err := e.Router.SetHealth(ctx, "b-0", scoring.Unhealthy); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.Router.SetHealth(ctx, "b-0", scoring.Healthy) }()
		checkAPIError(t, chat([]byte(`{"model": "model-b", "messages": [{"role":"user","content":"hi"}]}`)), 503, "no_healthy_worker", true)
	})
}

func checkAPIError(t *testing.T, err error, status int, code string, retryAfter bool) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an OpenAI API error with status %d, got %v", status, err)
	}
	if apiErr.StatusCode != status || apiErr.Code != code || apiErr.Message == "" || apiErr.Type == "" {
		t.Fatalf("got status %d code %q type %q message %q; want %d %q", apiErr.StatusCode, apiErr.Code, apiErr.Type, apiErr.Message, status, code)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); (ra != "") != retryAfter {
		t.Fatalf("Retry-After = %q, want present=%v", ra, retryAfter)
	}
	if ct := apiErr.Response.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error content-type %q", ct)
	}
}

// TestClientCannotChooseUpstream: a client's own x-llm-cluster header is
// overwritten; a model-a request naming model-b's worker still lands on a
// model-a worker.
func TestClientCannotChooseUpstream(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), nil)
	for _, forged := range []string{"b-0", "b-0.via.model-b", "pool.model-b"} {
		for i := 0; i < 5; i++ {
			resp, body := e.post("/v1/chat/completions", `{"model":"model-a","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
				map[string]string{"x-llm-cluster": forged})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("x-gpusim-id"); !strings.HasPrefix(got, "a-") {
				t.Fatalf("forged x-llm-cluster %q sent the request to %q", forged, got)
			}
		}
	}
	// A request the router refuses never reaches a worker, header or not.
	resp, _ := e.post("/v1/chat/completions", `{"model":"nope","messages":[]}`, map[string]string{"x-llm-cluster": "b-0"})
	if resp.StatusCode != 404 || resp.Header.Get("x-gpusim-id") != "" {
		t.Fatalf("refused request reached a worker: %d %q", resp.StatusCode, resp.Header.Get("x-gpusim-id"))
	}
}

// TestFailoverToAnotherWorker: after a model-a worker dies, every
// non-streaming model-a request succeeds through Envoy's retry.
func TestFailoverToAnotherWorker(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), nil)
	c := e.client()
	e.Workers["a-0"].Kill()
	served := map[string]int{}
	for i := 0; i < 30; i++ {
		var httpResp *http.Response
		if _, err := c.Chat.Completions.New(e.ctx, chatParams("model-a", 2), option.WithResponseInto(&httpResp)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		served[httpResp.Header.Get("x-routed-node")]++
	}
	if served["a-1"] != 30 {
		t.Fatalf("served by %v, want all 30 by a-1", served)
	}
	e.waitIdle(5 * time.Second)
}

// TestInFlightReturnsToZeroAfterAborts sends 1,000 requests, a third of them
// aborted by the client at a random moment, and checks that every worker's
// count returns to 0.
func TestInFlightReturnsToZeroAfterAborts(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "400", "--ttft-ms", "5"), func(c *config.Config) {
		for i := range c.Workers {
			c.Workers[i].MaxConcurrency = 64
		}
	})
	const total, conc = 1000, 16
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	var mu sync.Mutex
	outcomes := map[string]int{}
	client := &http.Client{}
	for i := 0; i < total; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			model := []string{"model-a", "model-b"}[i%2]
			stream := i%5 < 2
			body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":20,"stream":` + boolStr(stream) + `}`
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			if i%3 == 1 { // abort at a random moment: before, during or after the decision
				go func() {
					time.Sleep(time.Duration(i%50) * time.Millisecond) // the moment of the abort
					cancel()
				}()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
			resp, err := client.Do(req)
			kind := "error"
			if err == nil {
				_, rerr := copyLimited(new(strings.Builder), resp)
				resp.Body.Close()
				kind = http.StatusText(resp.StatusCode)
				if rerr != nil || ctx.Err() != nil {
					kind = "aborted mid-body"
				}
			} else if ctx.Err() != nil {
				kind = "aborted"
			}
			mu.Lock()
			outcomes[kind]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	t.Logf("outcomes: %v", outcomes)
	if outcomes["OK"] < total/2 {
		t.Fatalf("too few successes: %v", outcomes)
	}
	if outcomes["aborted"]+outcomes["aborted mid-body"] == 0 {
		t.Fatalf("no request was aborted; the test does not test aborts: %v", outcomes)
	}
	e.waitIdle(10 * time.Second)
}

// TestRouterDownFailsClosed: with fail-open switched off and no router
// replica, Envoy answers 503 with an OpenAI-style body and never reaches a
// worker.
func TestRouterDownFailsClosed(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), func(c *config.Config) { c.Envoy.FailureModeAllow = false })
	e.shutdownRouter()
	resp, body := e.post("/v1/chat/completions", `{"model":"model-a","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 503 || resp.Header.Get("x-gpusim-id") != "" {
		t.Fatalf("status %d from %q: %s", resp.StatusCode, resp.Header.Get("x-gpusim-id"), body)
	}
	if !strings.Contains(body, `"code":"router_unavailable"`) {
		t.Fatalf("body is not an OpenAI error: %s", body)
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestRouterDownFailsOpenByModel: with every router replica down (the
// rendered default, fail-open), requests are still served, each by a worker
// of its model, streams included; a client's own routing header still
// chooses nothing.
func TestRouterDownFailsOpenByModel(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "200", "--ttft-ms", "0"), nil)
	body := func(model string, stream bool) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":` + boolStr(stream) + `}`
	}
	resp, _ := e.post("/v1/chat/completions", body("model-a", false), nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-llm-fail-open") != "" {
		t.Fatalf("with the router up: %d, fail-open %q", resp.StatusCode, resp.Header.Get("x-llm-fail-open"))
	}
	// The fail-open model parse is skipped for requests the router decided.
	if n := e.envoyCounter("json_to_metadata.rq.success"); n != 0 {
		t.Fatalf("json_to_metadata parsed %d bodies the router decided", n)
	}
	// The router's own error replies did not bypass it either.
	for _, bad := range []struct {
		body   string
		status int
	}{{body("nope", false), 404}, {`{"model":`, 400}} {
		resp, b := e.post("/v1/chat/completions", bad.body, nil)
		if resp.StatusCode != bad.status || resp.Header.Get("x-llm-fail-open") != "" {
			t.Fatalf("router's %d reply: %d, fail-open %q: %s", bad.status, resp.StatusCode, resp.Header.Get("x-llm-fail-open"), b)
		}
	}
	e.shutdownRouter()
	for i := 0; i < 20; i++ {
		model, prefix := "model-a", "a-"
		if i%2 == 1 {
			model, prefix = "model-b", "b-"
		}
		resp, b := e.post("/v1/chat/completions", body(model, i%4 < 2), map[string]string{"x-llm-cluster": "b-0"})
		if resp.StatusCode != 200 {
			t.Fatalf("fail-open %s: %d %s", model, resp.StatusCode, b)
		}
		served := resp.Header.Get("x-gpusim-id")
		if !strings.HasPrefix(served, prefix) || resp.Header.Get("x-routed-node") != served || resp.Header.Get("x-llm-fail-open") != "true" {
			t.Fatalf("%s served by %q (x-routed-node %q, fail-open %q)", model, served, resp.Header.Get("x-routed-node"), resp.Header.Get("x-llm-fail-open"))
		}
		if i%4 < 2 && !strings.HasSuffix(b, "data: [DONE]\n\n") {
			t.Fatalf("stream cut: %q", b)
		}
	}
	if n := e.envoyCounter("json_to_metadata.rq.success"); n != 20 {
		t.Errorf("json_to_metadata parsed %d bodies of 20 undecided requests", n)
	}
	resp, b := e.post("/v1/chat/completions", body("nope", false), nil)
	if resp.StatusCode != 503 || !strings.Contains(b, `"error"`) {
		t.Fatalf("unknown model with no router: %d %s", resp.StatusCode, b)
	}
}

// envoyCounter sums Envoy's counters whose name ends in suffix.
func (e *env) envoyCounter(suffix string) int {
	e.t.Helper()
	resp, err := http.Get("http://" + e.Cfg.Envoy.Admin + "/stats?filter=" + url.QueryEscape(regexp.QuoteMeta(suffix)+"$"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(line, ": "); ok && strings.HasSuffix(name, suffix) {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				e.t.Fatalf("stat %q: %v", line, err)
			}
			total += n
		}
	}
	return total
}
