package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--listen", "127.0.0.1:0", "--decoder", "http://127.0.0.1:9", "--prefill-timeout", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.listen != "127.0.0.1:0" || o.cfg.Decoder != "http://127.0.0.1:9" || o.cfg.PrefillTimeout != 2*time.Second {
		t.Errorf("options %+v", o)
	}
	if _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, &stdout, io.Discard) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "listening on") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"--decoder", "nope"}, io.Discard, io.Discard); err == nil {
		t.Error("a bad decoder URL was accepted")
	}
}
