package gpusim

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// FuzzParseInference feeds arbitrary bodies to the request parser: it must
// never panic, and whatever it accepts must be runnable.
func FuzzParseInference(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","prompt":["a","b"],"max_completion_tokens":9000,"gpusim_prompt_tokens":5}`,
		`{"model":"m","prompt":[[1,2],[3]]}`,
		`{"prompt":"x","n_predict":-1}`,
		`{"model":"m","prompt":"x","max_tokens":-4}`,
		`{"model":"m","prompt":"x","max_tokens":4,"gpusim_output_tokens":9}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"gpusim_output_tokens":9000}`,
		`[]`,
	}
	for _, s := range seeds {
		for k := range 3 {
			f.Add(uint8(k), s)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body string) {
		k := apiKind(kind % 3)
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		p, err := parseInference(k, httptest.NewRecorder(), r, []string{"m"})
		if err != nil {
			return
		}
		if p.PromptTokens < 1 || p.MaxTokens < 1 || p.MaxTokens > maxMaxTokens || p.Model != "m" ||
			len(p.Blocks) > len(body)/prefix.BlockBytes {
			t.Fatalf("accepted %q as %+v", body, p)
		}
	})
}

func BenchmarkParseInference(b *testing.B) {
	body := `{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("x", 4000) +
		`"},{"role":"user","content":"hello"}],"max_tokens":128,"stream":true,"stream_options":{"include_usage":true}}`
	for b.Loop() {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if _, err := parseInference(kindChat, nil, r, []string{"m"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulateStep measures one forward pass of a full batch (256
// sequences), the engine's inner loop.
func BenchmarkSimulateStep(b *testing.B) {
	reqs := make([]SimRequest, 256)
	for i := range reqs {
		reqs[i] = SimRequest{0, 512, 1000, nil, false}
	}
	cfg := simConfig(func(c *Config) { c.Profile = "a100-llama3-8b" })
	steps := 0
	for b.Loop() {
		_, _, err := simulate(cfg, reqs, func(*Engine) error { steps++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}
