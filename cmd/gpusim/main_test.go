package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no model", []string{"--listen", "127.0.0.1:0"}, "model"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"serve subcommand", []string{"serve", "--listen", "127.0.0.1:0", "--profile", "x", "--model", "m"}, "unknown profile"},
		{"missing fleet", []string{"--fleet", "/nonexistent.yaml"}, "read fleet"},
		{"validate without trace", []string{"validate"}, "--trace is required"},
		{"validate bad step", []string{"validate", "--trace", "x", "--step", "0"}, "--step"},
		{"validate missing trace", []string{"validate", "--trace", "/nonexistent.csv"}, "nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
	if err := run(context.Background(), []string{"--help"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--model", "m", "--id", "w1"}, &stdout, io.Discard)
	}()
	deadline := time.Now().Add(5 * time.Second)
	var addr string
	for addr == "" {
		if _, after, ok := strings.Cut(stdout.String(), "listening on "); ok {
			addr = strings.TrimSpace(after)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no listening line")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-gpusim-id") != "w1" {
		t.Errorf("health %d id %q", resp.StatusCode, resp.Header.Get("x-gpusim-id"))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestValidateCommand(t *testing.T) {
	trace := filepath.Join("..", "..", "benchmark", "traces", "azure-conv-2023.csv")
	if _, err := os.Stat(trace); err != nil {
		t.Fatalf("trace not found (it is vendored in benchmark/traces): %v", err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"validate", "--trace", trace, "--requests", "500", "--step", "2"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "saturation rate:") {
		t.Errorf("output:\n%s", out.String())
	}
}
