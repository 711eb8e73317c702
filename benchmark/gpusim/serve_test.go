package gpusim

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
)

// serveFleet runs Serve in the background and returns each GPU's base URL
// and a channel that receives Serve's result.
func serveFleet(ctx context.Context, t *testing.T, cfgs []Config) (map[string]string, <-chan error) {
	t.Helper()
	type up struct{ id, addr string }
	ready := make(chan up, len(cfgs))
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfgs, zap.NewNop(), func(id, addr string) { ready <- up{id, addr} })
	}()
	urls := map[string]string{}
	for range cfgs {
		select {
		case u := <-ready:
			urls[u.id] = "http://" + u.addr
		case err := <-done:
			t.Fatalf("serve ended early: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("gpus not ready")
		}
	}
	return urls, done
}

func waitServe(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return")
	}
}

func TestServeFleetAndShutdown(t *testing.T) {
	base := instantConfig(func(c *Config) { c.Models = []string{"m"} })
	cfgs, err := ParseFleet([]byte(`
- {id: gpu-a, listen: "127.0.0.1:0"}
- {id: gpu-b, listen: "127.0.0.1:0", profile: h100-llama2-7b, metrics_format: sglang}
`), base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls, done := serveFleet(ctx, t, cfgs)
	for id, url := range urls {
		resp := post(t, url+"/v1/completions", smallReq)
		readAll(t, resp)
		if resp.StatusCode != 200 || resp.Header.Get("x-gpusim-id") != id {
			t.Errorf("%s: %d from %q", id, resp.StatusCode, resp.Header.Get("x-gpusim-id"))
		}
	}
	cancel()
	waitServe(t, done)
	if _, err := http.Get(urls["gpu-a"] + "/health"); err == nil {
		t.Error("listener still open after shutdown")
	}
}

func TestExitAfter(t *testing.T) {
	cfg := instantConfig(func(c *Config) { c.Listen, c.Models, c.ExitAfter = "127.0.0.1:0", []string{"m"}, 2 })
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	urls, done := serveFleet(context.Background(), t, []Config{cfg})
	url := urls[cfg.ID]
	for i := range 2 {
		resp := post(t, url+"/v1/completions", smallReq)
		if body := readAll(t, resp); resp.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	waitServe(t, done) // the process would exit here
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("still serving after exit-after")
	}
}
