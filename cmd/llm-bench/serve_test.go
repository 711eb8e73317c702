package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/emulate"
	"github.com/llm-router/llm-router/test/stack"
)

// llm-bench serve runs a router with an emulation of another scheduler,
// which llm-router refuses (cmd/llm-router's test): the benchmark's
// routers get the emulations, the product does not.
func TestServeRunsARouterWithAnEmulation(t *testing.T) {
	a := stack.MustFreeAddrs(2)
	path := filepath.Join(t.TempDir(), "router.yaml")
	cfg := fmt.Sprintf("strategy: %s\nextproc_listen: %s\nadmin_listen: %s\nlog_level: error\nworkers:\n  - {id: w0, address: 127.0.0.1:1, models: [m], max_concurrency: 1, metrics_format: none}\n",
		emulate.PrefixQueueKVMaxScore, a[0], a[1])
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", path}, io.Discard, io.Discard) }()
	healthy := make(chan error, 1)
	go func() { healthy <- stack.WaitHTTP(ctx, "http://"+a[1]+"/health", 200, 20*time.Second) }()
	select {
	case err := <-done:
		cancel()
		t.Fatalf("serve ended before the router answered /health: %v", err)
	case err := <-healthy:
		if err != nil {
			cancel()
			t.Fatalf("the router did not answer /health: %v (serve: %v)", err, <-done)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
