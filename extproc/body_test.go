package extproc

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scoring/prefix"
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
				if !reflect.DeepEqual(got, tc.want) {
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
		`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("s", 200) + `"},"x",{"content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","prompt":["` + strings.Repeat("p", 130) + `"]}`,
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
		if len(b.Blocks) > MaxPromptBlocks || len(b.Blocks)*prefix.BlockBytes > len(body) {
			t.Fatalf("%d blocks from a %d-byte body", len(b.Blocks), len(body))
		}
	})
}

// BenchmarkParseBody measures the whole parse, block hashes included, on a
// chat body (a system prompt and a user turn) and a completions body.
func BenchmarkParseBody(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10} {
		text := strings.Repeat("lorem ipsum ", size/12/2)
		chat := []byte(`{"model":"llama-3-8b","max_tokens":128,"stream":true,"messages":[{"role":"system","content":"` +
			text + `"},{"role":"user","content":"` + text + `"}]}`)
		prompt := []byte(`{"model":"llama-3-8b","max_tokens":128,"prompt":"` + text + text + `"}`)
		for _, c := range []struct {
			name string
			ep   Endpoint
			body []byte
		}{{"chat", EndpointChat, chat}, {"prompt", EndpointCompletions, prompt}} {
			b.Run(c.name+"/"+byteSize(size), func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := parseBody(c.ep, c.body, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func byteSize(n int) string { return strconv.Itoa(n>>10) + "KB" }

func hashOf(parts ...string) []uint64 {
	var h prefix.Hasher
	for _, p := range parts {
		h.WriteString(p)
	}
	return h.Blocks()
}

func TestParseBodyBlocks(t *testing.T) {
	sys := strings.Repeat("You are a careful assistant. ", 20) // 580 bytes: 9 blocks
	chat := func(user string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"system","content":"` + sys + `"},{"role":"user","content":"` + user + `"}]}`)
	}
	parse := func(t *testing.T, ep Endpoint, body []byte) []uint64 {
		t.Helper()
		b, err := parseBody(ep, body, "")
		if err != nil {
			t.Fatal(err)
		}
		return b.Blocks
	}

	t.Run("equal prompts give equal blocks", func(t *testing.T) {
		a, b := parse(t, EndpointChat, chat("same question")), parse(t, EndpointChat, chat("same question"))
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Fatalf("blocks differ or are empty: %d vs %d", len(a), len(b))
		}
	})
	t.Run("chat hashes raw role then raw content of each message", func(t *testing.T) {
		user := strings.Repeat("q", 100)
		want := hashOf(`"system"`, `"`+sys+`"`, `"user"`, `"`+user+`"`)
		// Other message keys, and key order, do not change what is hashed.
		body := []byte(`{"model":"m","messages":[{"content":"` + sys + `","name":"x","role":"system"},{"role":"user","content":"` + user + `"}]}`)
		if got := parse(t, EndpointChat, body); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %d blocks, want %d, equal %v", len(got), len(want), reflect.DeepEqual(got, want))
		}
	})
	t.Run("completions hash the raw prompt", func(t *testing.T) {
		p := strings.Repeat("a", 300)
		want := hashOf(`"` + p + `"`)
		if got := parse(t, EndpointCompletions, []byte(`{"model":"m","prompt":"`+p+`"}`)); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		arr := hashOf(`["` + p + `"]`) // an array prompt is hashed as sent, brackets too
		if got := parse(t, EndpointLlamaCompletion, []byte(`{"model":"m","prompt":["`+p+`"]}`)); !reflect.DeepEqual(got, arr) {
			t.Fatal("array prompt")
		}
	})
	t.Run("a shared first message gives shared leading blocks", func(t *testing.T) {
		a, b := parse(t, EndpointChat, chat("first question")), parse(t, EndpointChat, chat("a different one"))
		// "system" (8 bytes) and the quoted system prompt (582): 590 bytes, 9 full blocks.
		if m := prefix.Match(a, b); m != 9 {
			t.Fatalf("shared %d leading blocks of %d and %d, want 9", m, len(a), len(b))
		}
	})
	t.Run("short prompts and embeddings have none; huge ones are bounded", func(t *testing.T) {
		if got := parse(t, EndpointChat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)); got != nil {
			t.Fatalf("short prompt: %v", got)
		}
		if got := parse(t, EndpointEmbeddings, []byte(`{"model":"m","input":"`+strings.Repeat("x", 1000)+`"}`)); got != nil {
			t.Fatal("embeddings are not hashed")
		}
		huge := []byte(`{"model":"m","prompt":"` + strings.Repeat("x", (MaxPromptBlocks+10)*prefix.BlockBytes) + `"}`)
		if got := parse(t, EndpointCompletions, huge); len(got) != MaxPromptBlocks {
			t.Fatalf("%d blocks, want the bound %d", len(got), MaxPromptBlocks)
		}
	})
}
