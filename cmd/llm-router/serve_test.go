package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// llm-router does not link the benchmark's emulations of other schedulers:
// their names are unknown strategies here (llm-bench serve runs them).
func TestServeRefusesAnEmulation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(path, []byte("strategy: prefix_queue_kv_max_score\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"serve", "--config", path}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `strategy: unknown strategy "prefix_queue_kv_max_score"`) {
		t.Fatalf("serve with an emulation: %v", err)
	}
}
