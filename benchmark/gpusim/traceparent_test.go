package gpusim

import (
	"net/http"
	"strings"
	"testing"
)

// A request's traceparent comes back as x-gpusim-traceparent; none, none.
func TestTraceparentIsEchoed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond = 0, 0
	_, base := startServer(t, cfg)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, sent := range []string{tp, ""} {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"x","max_tokens":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if sent != "" {
			req.Header.Set("traceparent", sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if got := resp.Header.Get("x-gpusim-traceparent"); resp.StatusCode != 200 || got != sent {
			t.Fatalf("status %d, x-gpusim-traceparent %q, want %q", resp.StatusCode, got, sent)
		}
	}
}
