package pdsidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/benchmark/gpusim"
)

// gpu starts a simulated GPU (simple mode, a KV link unless gbps is 0)
// and returns its base URL.
func gpu(t *testing.T, id string, gbps, ttftMs float64) string {
	t.Helper()
	c := gpusim.DefaultConfig()
	c.ID, c.Listen, c.Models = id, "127.0.0.1:0", []string{"m"}
	c.KVLinkGbps, c.TTFTMs, c.TokensPerSecond = gbps, ttftMs, 0
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := gpusim.NewServer(c, zap.NewNop())
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
	return hs.URL
}

// counter reads a counter or a histogram's count of a GPU's /metrics.
func counter(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var v float64
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			v += float64(m.GetHistogram().GetSampleCount())
		default:
			v += m.GetCounter().GetValue()
		}
	}
	return v
}

func sidecar(t *testing.T, decoder string, timeout time.Duration) (*Sidecar, string) {
	t.Helper()
	s, err := New(Config{Decoder: decoder, PrefillTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// send posts a chat request of 4 tokens through the sidecar, naming
// prefiller when not empty, and returns how it was served and the tokens
// the client received.
func send(t *testing.T, url, prefiller string, stream bool) (string, int) {
	t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":"hello"}],"gpusim_prompt_tokens":300,"max_tokens":4`
	if stream {
		body += `,"stream":true`
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body+"}"))
	req.Header.Set("Content-Type", "application/json")
	if prefiller != "" {
		req.Header.Set(PrefillerHeader, prefiller)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		var out struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			KV json.RawMessage `json:"kv_transfer_params"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out.KV != nil {
			t.Error("the client got kv_transfer_params")
		}
		return resp.Header.Get(ServedHeader), out.Usage.CompletionTokens
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"tok "`) {
			n++
		}
	}
	return resp.Header.Get(ServedHeader), n
}

func hostPort(base string) string { return strings.TrimPrefix(base, "http://") }

func TestSidecarWithGPUPair(t *testing.T) {
	prefill := gpu(t, "prefill-0", 100, 0)
	decode := gpu(t, "decode-0", 100, 0)
	sc, url := sidecar(t, decode, 5*time.Second)

	// No header: the decode engine serves it alone.
	if how, n := send(t, url, "", false); how != ServedAggregated || n != 4 {
		t.Fatalf("no header: served %q with %d tokens", how, n)
	}
	if got := counter(t, prefill, "vllm:generation_tokens_total"); got != 0 {
		t.Errorf("no header: the prefiller generated %v tokens", got)
	}

	// The header: one token on the prefiller, the KV loaded by the decoder.
	for _, stream := range []bool{false, true} {
		if how, n := send(t, url, hostPort(prefill), stream); how != ServedDisaggregated || n != 4 {
			t.Fatalf("stream %v: served %q with %d tokens, want disaggregated with 4", stream, how, n)
		}
	}
	if got := counter(t, prefill, "vllm:generation_tokens_total"); got != 2 {
		t.Errorf("the prefiller generated %v tokens, want one a request", got)
	}
	if got := counter(t, decode, "vllm:nixl_xfer_time_seconds"); got != 2 {
		t.Errorf("the decoder loaded %v KV transfers, want 2", got)
	}
	if got := counter(t, decode, "vllm:generation_tokens_total"); got != 4+8 {
		t.Errorf("the decoder generated %v tokens, want 12", got)
	}
	if c := sc.Counts(); c != (Counts{Disaggregated: 2, Aggregated: 1}) {
		t.Errorf("counts %+v", c)
	}
}

func TestSidecarFallsBackToLocal(t *testing.T) {
	decode := gpu(t, "decode-0", 100, 0)
	slow := gpu(t, "slow", 100, 10_000)   // first token after 10 s
	plain := gpu(t, "no-connector", 0, 0) // answers without kv_transfer_params
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()

	sc, url := sidecar(t, decode, 300*time.Millisecond)
	for name, target := range map[string]string{
		"dead": dead, "timeout": hostPort(slow), "no params": hostPort(plain), "503": hostPort(failing.URL),
	} {
		start := time.Now()
		if how, n := send(t, url, target, false); how != ServedFallback || n != 4 {
			t.Errorf("%s: served %q with %d tokens, want fallback with 4", name, how, n)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	if got := counter(t, decode, "vllm:nixl_xfer_time_seconds"); got != 0 {
		t.Errorf("fallbacks loaded %v KV transfers", got)
	}
	if c := sc.Counts(); c.Fallback != 4 {
		t.Errorf("counts %+v, want 4 fallbacks", c)
	}
}

func TestPrefillerHeader(t *testing.T) {
	tests := []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{"10.0.0.1:8000"}, "10.0.0.1:8000"},
		{[]string{" 10.0.0.1:8000 , 10.0.0.2:8000"}, "10.0.0.1:8000"},
		{[]string{"http://10.0.0.1:8000"}, "10.0.0.1:8000"},
		{[]string{"", "10.0.0.2:8000"}, "10.0.0.2:8000"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add(PrefillerHeader, v)
		}
		if got := prefiller(h); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.values, got, tt.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, c := range []Config{
		{Decoder: "127.0.0.1:8200", PrefillTimeout: time.Second},
		{Decoder: "http://127.0.0.1:8200"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
