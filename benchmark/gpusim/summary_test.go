package gpusim

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

func TestStreamSummary(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StreamSummary = true
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0.5 // a token every 2 s after the first
	_, base := startServer(t, cfg)
	resp := post(t, base+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":5,"stream":true}`)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if ev := nextEvent(t, br); !strings.Contains(ev, `"role":"assistant","content":"tok "`) {
		t.Fatalf("first event %s", ev)
	}
	// The first token is out before the others exist.
	if st := adminState(t, base); st.Running != 1 || st.Completed != 0 {
		t.Fatalf("state after the first event: %+v", st)
	}
	readAll(t, post(t, base+"/admin/config", `{"tokens_per_second":0}`))
	if ev := nextEvent(t, br); !strings.Contains(ev, `"content":"`+tokensText(4)+`"`) || strings.Contains(ev, "role") {
		t.Fatalf("rest event %s", ev)
	}
	if ev := nextEvent(t, br); !strings.Contains(ev, `"finish_reason":"length"`) {
		t.Fatalf("finish event %s", ev)
	}
	var u struct {
		Usage usage   `json:"usage"`
		ITL   []int64 `json:"gpusim_itl_us"`
	}
	ev := nextEvent(t, br)
	if err := json.Unmarshal([]byte(ev), &u); err != nil {
		t.Fatal(err)
	}
	// Sent without include_usage; the gaps are the engine's: the wait for
	// the knob change, then three tokens at once.
	if u.Usage != newUsage(2, 5) || len(u.ITL) != 4 || u.ITL[0] <= 0 || u.ITL[1] != 0 || u.ITL[3] != 0 {
		t.Fatalf("usage event %s", ev)
	}
	if ev := nextEvent(t, br); ev != "[DONE]" {
		t.Fatalf("last event %q", ev)
	}
}

func TestStreamSummaryFormats(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StreamSummary = true
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 1000
	_, base := startServer(t, cfg)
	tests := []struct {
		name, path, body string
		want             []string
		events           int
	}{
		{
			"completions", "/v1/completions", `{"model":"m","prompt":"abcdefgh","max_tokens":3,"stream":true}`,
			[]string{`"text":"tok "`, `"text":"tok tok "`, `"finish_reason":"length"`, `"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5},"gpusim_itl_us":[`, "[DONE]"},
			5,
		},
		{
			"one token", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1,"stream":true}`,
			[]string{`"gpusim_itl_us":[]`},
			4,
		},
		{
			"llama.cpp", "/completion", `{"prompt":"abcdefgh","n_predict":4,"stream":true}`,
			[]string{`{"content":"tok ","stop":false}`, `{"content":"tok tok tok ","stop":false}`, `"stop":true`, `"tokens_predicted":4`, `"gpusim_itl_us":[`},
			3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := string(readAll(t, post(t, base+tt.path, tt.body)))
			if n := strings.Count(body, "data: "); n != tt.events {
				t.Errorf("%d events, want %d:\n%s", n, tt.events, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
		})
	}
}

func TestTokenTimesOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		e, err := newEngine(simConfig(func(c *Config) { c.StreamSummary, c.TTFTMs, c.TokensPerSecond = on, 0, 0 }), &virtualClock{})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := e.Submit(Request{Model: "m", PromptTokens: 4, MaxTokens: 3})
		e.mu.Lock()
		e.sched.plan(0)
		e.sched.advance(0)
		e.mu.Unlock()
		if gaps := st.TokenGaps(); (gaps != nil) != on || on && len(gaps) != 2 {
			t.Errorf("stream summary %v: gaps %v", on, gaps)
		}
	}
}
