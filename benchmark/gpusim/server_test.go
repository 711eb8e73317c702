package gpusim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// startServer serves cfg on an httptest server, its engine in real time.
func startServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.ID == "" {
		cfg.ID = "gpu-test"
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"m"}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Run(ctx)
		close(done)
	}()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
	})
	return srv, hs.URL
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := open(context.Background(), url, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// open posts body and returns the response unread.
func open(ctx context.Context, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nextEvent returns the data of the next SSE event.
func nextEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %v (so far %q)", err, data)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" && data != "" {
			return data
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func adminState(t *testing.T, base string) State {
	t.Helper()
	_, _, b := get(t, base+"/admin/state")
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStreamingArrivesIncrementally(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0.5 // a token every 2 s after the first
	_, base := startServer(t, cfg)
	resp := post(t, base+"/v1/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.StatusCode != 200 {
		t.Fatalf("status %d content type %q", resp.StatusCode, ct)
	}
	br := bufio.NewReader(resp.Body)
	var first struct {
		Object  string `json:"object"`
		Choices []struct {
			Delta struct{ Role, Content string } `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, br)), &first); err != nil {
		t.Fatal(err)
	}
	if first.Object != "chat.completion.chunk" || first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.Content != tokenText {
		t.Fatalf("first chunk %+v", first)
	}
	// The first token is out; the other four are seconds away.
	if st := adminState(t, base); st.Running != 1 || st.Completed != 0 {
		t.Fatalf("state after first chunk: %+v", st)
	}
	readAll(t, post(t, base+"/admin/config", `{"tokens_per_second":0}`))
	for range 4 {
		if ev := nextEvent(t, br); !strings.Contains(ev, `"content":"tok "`) || strings.Contains(ev, "role") {
			t.Fatalf("token chunk %s", ev)
		}
	}
	if ev := nextEvent(t, br); !strings.Contains(ev, `"finish_reason":"length"`) {
		t.Fatalf("finish chunk %s", ev)
	}
	var u struct {
		Choices []any `json:"choices"`
		Usage   usage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, br)), &u); err != nil {
		t.Fatal(err)
	}
	if u.Choices == nil || len(u.Choices) != 0 || u.Usage != newUsage(2, 5) {
		t.Fatalf("usage chunk %+v", u)
	}
	if ev := nextEvent(t, br); ev != "[DONE]" {
		t.Fatalf("last event %q", ev)
	}
}

func TestStreamFormats(t *testing.T) {
	tests := []struct {
		name, path, body string
		wantTokenEvent   string
		wantLast         string
		tokens           int
	}{
		{
			"completions", "/v1/completions", `{"model":"m","prompt":"abcdefgh","max_tokens":3,"stream":true}`,
			`"text":"tok ","finish_reason":null`, "[DONE]", 3,
		},
		{
			"llama.cpp", "/completion", `{"prompt":"abcdefgh","n_predict":-1,"stream":true}`,
			`{"content":"tok ","stop":false}`, `"stop":true`, 16,
		},
	}
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0
	_, base := startServer(t, cfg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, base+tt.path, tt.body)
			body := string(readAll(t, resp))
			events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
			if got := strings.Count(body, tt.wantTokenEvent); got != tt.tokens {
				t.Errorf("%d token events, want %d:\n%s", got, tt.tokens, body)
			}
			if last := events[len(events)-1]; !strings.Contains(last, tt.wantLast) {
				t.Errorf("last event %q", last)
			}
		})
	}
}

func TestNonStreamed(t *testing.T) {
	tests := []struct {
		name, path, body string
		want             []string
	}{
		{
			"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"12345678"}]}],"max_completion_tokens":3}`,
			[]string{`"object":"chat.completion"`, `"content":"tok tok tok "`, `"finish_reason":"length"`, `"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}`},
		},
		{
			"chat default length", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			[]string{`"finish_reason":"stop"`, `"completion_tokens":16`, `"prompt_tokens":1`},
		},
		{
			"completions with prompt override", "/v1/completions", `{"model":"m","prompt":["ab","cd"],"max_tokens":20000,"gpusim_prompt_tokens":4000}`,
			[]string{`"object":"text_completion"`, `"prompt_tokens":4000,"completion_tokens":8192`},
		},
		{
			"llama.cpp", "/completion", `{"prompt":"abcdefgh","n_predict":2}`,
			[]string{`"content":"tok tok "`, `"stop":true`, `"tokens_predicted":2`, `"tokens_evaluated":2`, `"stop_type":"limit"`},
		},
	}
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0
	_, base := startServer(t, cfg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, base+tt.path, tt.body)
			body := string(readAll(t, resp))
			if resp.StatusCode != 200 || resp.Header.Get("x-gpusim-id") != "gpu-test" {
				t.Fatalf("status %d id %q: %s", resp.StatusCode, resp.Header.Get("x-gpusim-id"), body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Models = []string{"m", "n"}
	cfg.Profile = "a40-llama2-7b" // 54,528 KV tokens
	_, base := startServer(t, cfg)
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{
			"unknown model", "POST", "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404,
			`{"error":{"message":"model not found: the model ` + "`x`" + ` does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
		},
		{"missing model", "POST", "/v1/completions", `{"prompt":"hi"}`, 400, `"type":"invalid_request_error"`},
		{"bad json", "POST", "/v1/completions", `{"model":`, 400, `"code":"invalid_request"`},
		{"zero max tokens", "POST", "/v1/completions", `{"model":"m","prompt":"hi","max_tokens":0}`, 400, `max_tokens`},
		{"too long", "POST", "/v1/completions", `{"model":"n","prompt":"hi","gpusim_prompt_tokens":60000,"max_tokens":2}`, 400, `"code":"context_length_exceeded"`},
		{"wrong method", "GET", "/v1/completions", ``, 405, ``},
		{"no such path", "GET", "/nope", ``, 404, ``},
		{"no slots endpoint without slots", "GET", "/slots", ``, 404, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tt.status || !bytes.Contains(body, []byte(tt.want)) {
				t.Errorf("got %d %s, want %d containing %s", resp.StatusCode, body, tt.status, tt.want)
			}
			if resp.Header.Get("x-gpusim-id") != "gpu-test" {
				t.Error("no x-gpusim-id")
			}
		})
	}
	code, _, body := get(t, base+"/v1/models")
	if code != 200 || !strings.Contains(string(body), `"id":"m"`) || !strings.Contains(string(body), `"id":"n"`) {
		t.Errorf("models: %d %s", code, body)
	}
}

// doPost posts body and reads the whole response.
func doPost(ctx context.Context, url, body string) (*http.Response, error) {
	resp, err := open(ctx, url, body)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp, err
}
