package extproc

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseBody(t *testing.T) {
	tests := []struct {
		name    string
		ep      Endpoint
		body    string
		want    Body
		wantErr string // param name, "" for ok; "-" for an error without param
	}{
		{
			"chat", EndpointChat, `{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":12,"stream":true}`,
			Body{Model: "m", MaxTokens: 12, Stream: true, PromptTokens: 11},
			"",
		},
		{
			"max_completion_tokens wins", EndpointChat, `{"model":"m","messages":[],"max_tokens":5,"max_completion_tokens":9}`,
			Body{Model: "m", MaxTokens: 9, PromptTokens: 1},
			"",
		},
		{
			"null fields are absent", EndpointChat, `{"model":"m","messages":[],"max_tokens":null,"stream":null}`,
			Body{Model: "m", PromptTokens: 1},
			"",
		},
		{
			"completions", EndpointCompletions, `{"model":"m","prompt":"abcdefgh","max_tokens":3}`,
			Body{Model: "m", MaxTokens: 3, PromptTokens: 3},
			"",
		},
		{"embeddings", EndpointEmbeddings, `{"model":"e","input":["a","b"]}`, Body{Model: "e", PromptTokens: 3}, ""},
		{"llama.cpp n_predict", EndpointLlamaCompletion, `{"prompt":"hi","n_predict":64,"stream":false}`, Body{Model: "only", MaxTokens: 64, PromptTokens: 1}, ""},
		{"llama.cpp unlimited", EndpointLlamaCompletion, `{"prompt":"hi","n_predict":-1}`, Body{Model: "only", PromptTokens: 1}, ""},
		{
			"include_usage", EndpointChat, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			Body{Model: "m", Stream: true, PromptTokens: 1, IncludeUsage: true},
			"",
		},
		{"nested model field is not the model", EndpointChat, `{"messages":[{"model":"x"}]}`, Body{}, "model"},
		{"empty", EndpointChat, ``, Body{}, "-"},
		{"not json", EndpointChat, `{"model":`, Body{}, "-"},
		{"not an object", EndpointChat, `["model"]`, Body{}, "-"},
		{"model not a string", EndpointChat, `{"model":1,"messages":[]}`, Body{}, "model"},
		{"blank model", EndpointChat, `{"model":" ","messages":[]}`, Body{}, "model"},
		{"max_tokens string", EndpointChat, `{"model":"m","messages":[],"max_tokens":"9"}`, Body{}, "max_tokens"},
		{"max_tokens fraction", EndpointChat, `{"model":"m","messages":[],"max_tokens":1.5}`, Body{}, "max_tokens"},
		{"max_tokens negative", EndpointChat, `{"model":"m","messages":[],"max_tokens":-1}`, Body{}, "max_tokens"},
		{"n_predict below -1", EndpointLlamaCompletion, `{"prompt":"x","n_predict":-2}`, Body{}, "n_predict"},
		{"stream not bool", EndpointChat, `{"model":"m","messages":[],"stream":1}`, Body{}, "stream"},
		{"messages missing", EndpointChat, `{"model":"m"}`, Body{}, "messages"},
		{"messages not array", EndpointChat, `{"model":"m","messages":"hi"}`, Body{}, "messages"},
		{"prompt missing", EndpointCompletions, `{"model":"m"}`, Body{}, "prompt"},
		{"input missing", EndpointEmbeddings, `{"model":"m"}`, Body{}, "input"},
		{"embeddings cannot stream", EndpointEmbeddings, `{"model":"m","input":"x","stream":true}`, Body{}, "stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBody(tc.ep, []byte(tc.body), "only")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("want a bad request, got %v", err)
			}
			var pe *paramError
			if !errors.As(err, &pe) {
				t.Fatalf("no param error: %v", err)
			}
			if tc.wantErr != "-" && pe.Param != tc.wantErr {
				t.Fatalf("param %q, want %q (%v)", pe.Param, tc.wantErr, err)
			}
		})
	}
}

func TestEndpointFor(t *testing.T) {
	for path, want := range map[string]Endpoint{
		"/v1/chat/completions":         EndpointChat,
		"/v1/chat/completions/":        EndpointChat,
		"/v1/chat/completions?x=1":     EndpointChat,
		"/v1/completions":              EndpointCompletions,
		"/v1/embeddings":               EndpointEmbeddings,
		"/completion":                  EndpointLlamaCompletion,
		"/v1/models":                   EndpointNone,
		"/v1/chat/completions/extra/x": EndpointNone,
	} {
		if got := endpointFor(path); got != want {
			t.Errorf("endpointFor(%q) = %v, want %v", path, got, want)
		}
	}
}

// FuzzParseBody: client bodies never crash the parser, and whatever it
// accepts has a model and sane numbers.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[],"max_tokens":3}`,
		`{"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"x","n_predict":-1}`,
		`{"model":"m","input":[1,2,3]}`,
		`{"model":1e400}`, `[]`, `{`, `{"model":"\u0000"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, ep uint8) {
		e := Endpoint(1 + int(ep)%4)
		b, err := parseBody(e, body, "default")
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error of the wrong kind: %v", err)
			}
			return
		}
		if strings.TrimSpace(b.Model) == "" || b.MaxTokens < 0 || b.PromptTokens < 0 {
			t.Fatalf("accepted a bad body: %+v from %q", b, body)
		}
	})
}

func BenchmarkParseBody(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10} {
		body := []byte(`{"model":"llama-3-8b","max_tokens":128,"stream":true,"messages":[{"role":"user","content":"` +
			strings.Repeat("lorem ipsum ", size/12) + `"}]}`)
		b.Run(byteSize(size), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseBody(EndpointChat, body, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string { return strconv.Itoa(n>>10) + "KB" }
