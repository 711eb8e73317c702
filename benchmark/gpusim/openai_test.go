package gpusim

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scoring/prefix"
)

func parse(t *testing.T, kind apiKind, body string) (parsedRequest, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	return parseInference(kind, httptest.NewRecorder(), r, []string{"m"})
}

func TestParseOutputTokens(t *testing.T) {
	tests := []struct {
		name, body string
		kind       apiKind
		wantTokens int
		wantReason string
		wantErr    bool
	}{
		{"true length, no limit", `{"model":"m","prompt":"x","gpusim_output_tokens":40}`, kindCompletion, 40, "stop", false},
		{"limit above the true length", `{"model":"m","prompt":"x","max_tokens":100,"gpusim_output_tokens":40}`, kindCompletion, 40, "stop", false},
		{"limit equal", `{"model":"m","prompt":"x","max_tokens":40,"gpusim_output_tokens":40}`, kindCompletion, 40, "stop", false},
		{"limit cuts it short", `{"model":"m","prompt":"x","max_tokens":10,"gpusim_output_tokens":40}`, kindCompletion, 10, "length", false},
		{"max_completion_tokens cuts", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":5,"gpusim_output_tokens":40}`, kindChat, 5, "length", false},
		{"n_predict cuts", `{"prompt":"x","n_predict":7,"gpusim_output_tokens":40}`, kindLlama, 7, "length", false},
		{"n_predict unlimited", `{"prompt":"x","n_predict":-1,"gpusim_output_tokens":40}`, kindLlama, 40, "stop", false},
		{"gpusim cap", `{"model":"m","prompt":"x","gpusim_output_tokens":9000}`, kindCompletion, maxMaxTokens, "length", false},
		{"zero", `{"model":"m","prompt":"x","gpusim_output_tokens":0}`, kindCompletion, 0, "", true},
		{"absent: as before", `{"model":"m","prompt":"x"}`, kindCompletion, defaultMaxTokens, "stop", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parse(t, tt.kind, tt.body)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil || p.MaxTokens != tt.wantTokens || p.StopReason != tt.wantReason {
				t.Errorf("got %d tokens, %q (err %v); want %d, %q", p.MaxTokens, p.StopReason, err, tt.wantTokens, tt.wantReason)
			}
		})
	}
}

// TestParseBlockHashes: the blocks are those of scoring/prefix over the
// raw JSON as sent, whitespace and escapes included.
func TestParseBlockHashes(t *testing.T) {
	text := MooncakeRow{InputLength: 300, HashIDs: []int64{1}}.Prompt()
	hash := func(parts ...string) []uint64 {
		var h prefix.Hasher
		for _, p := range parts {
			h.WriteString(p)
		}
		return h.Blocks()
	}
	sys := `"you are \"helpful\" ` + strings.Repeat("é", 40) + `"`
	tests := []struct {
		name, body string
		kind       apiKind
		want       []uint64
	}{
		{"one user message", `{"model":"m","messages":[{"role":"user","content":"` + text + `"}]}`, kindChat, ChatBlockHashes(text)},
		{
			"raw bytes kept", `{"model":"m","messages":[{"content":` + sys + `,"role" : "system"},{"role":"user","content":[ {"type":"text","text":"` + text + `"} ]}]}`, kindChat,
			hash(`"system"`, sys, `"user"`, `[ {"type":"text","text":"`+text+`"} ]`),
		},
		{"completion prompt", `{"model":"m","prompt": [ "` + text + `" ]}`, kindCompletion, hash(`[ "` + text + `" ]`)},
		{"llama prompt", `{"prompt":"` + text + `"}`, kindLlama, hash(`"` + text + `"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parse(t, tt.kind, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.want) == 0 || len(p.Blocks) != len(tt.want) || match(p.Blocks, tt.want) != len(tt.want) {
				t.Errorf("blocks %d, want %d, %d matching", len(p.Blocks), len(tt.want), match(p.Blocks, tt.want))
			}
		})
	}
	if _, err := parse(t, kindChat, `{"model":"m","messages":[{"role":5,"content":"x"}]}`); err == nil {
		t.Error("a non-string role must be rejected")
	}
}

func TestServeOutputTokensAndPrefixHits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Profile, cfg.Slowdown = "a40-llama2-7b", 1e-6 // 54,528 KV tokens
	_, base := startServer(t, cfg)
	tests := []struct {
		name, body string
		status     int
		want       []string
	}{
		{
			"the true length decides the fit", `{"model":"m","prompt":"x","gpusim_prompt_tokens":50000,"max_tokens":8000,"gpusim_output_tokens":10}`,
			200,
			[]string{`"completion_tokens":10`, `"finish_reason":"stop"`},
		},
		{
			"without it the limit does", `{"model":"m","prompt":"x","gpusim_prompt_tokens":50000,"max_tokens":8000}`,
			400,
			[]string{`context_length_exceeded`},
		},
		{
			"cut by max_tokens", `{"model":"m","prompt":"x","max_tokens":3,"gpusim_output_tokens":10}`,
			200,
			[]string{`"completion_tokens":3`, `"finish_reason":"length"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, base+"/v1/completions", tt.body)
			body := string(readAll(t, resp))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s: %s", w, body)
				}
			}
		})
	}
	before := adminState(t, base)
	text := MooncakeRow{InputLength: 1000, HashIDs: []int64{3, 4}}.Prompt()
	chat := `{"model":"m","messages":[{"role":"user","content":"` + text + `"}],"max_tokens":2}`
	readAll(t, post(t, base+"/v1/chat/completions", chat))
	readAll(t, post(t, base+"/v1/chat/completions", chat))
	st := adminState(t, base)
	if q, h := st.PrefixCacheQueries-before.PrefixCacheQueries, st.PrefixCacheHits-before.PrefixCacheHits; q != 2000 || h != 992 || st.CachedBlocks == 0 {
		t.Errorf("two identical chats: %d queried, %d hit (want 2000, 992), %d blocks cached", q, h, st.CachedBlocks)
	}
}
