// Package lora loads and unloads LoRA adapters on workers through the
// engine's runtime API (vLLM's POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter, which gpusim serves too), for lora.manage: the
// scheduler declares what it needs (scheduler.AdapterLoader) and this
// package is its HTTP side.
package lora

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// Loader calls the engines' adapter API over plain HTTP.
type Loader struct {
	Client *http.Client
}

var _ scheduler.AdapterLoader = (*Loader)(nil)

// Load loads adapter a on the engine at address. An engine that already
// has it (vLLM answers 400 "... has already been loaded") counts as
// loaded: another replica's load, or one from before a restart of the
// router, got there first.
func (l *Loader) Load(ctx context.Context, address string, a state.Adapter) error {
	if a.Path == "" {
		return fmt.Errorf("load %s on %s: the adapter has no path (lora.adapters[].path)", a.Name, address)
	}
	err := l.post(ctx, address, "/v1/load_lora_adapter", map[string]string{"lora_name": a.Name, "lora_path": a.Path})
	if err != nil && strings.Contains(err.Error(), "already been loaded") {
		return nil
	}
	return err
}

// Unload unloads adapter name from the engine at address.
func (l *Loader) Unload(ctx context.Context, address, name string) error {
	return l.post(ctx, address, "/v1/unload_lora_adapter", map[string]string{"lora_name": name})
}

// post sends body to the engine; a status other than 200 is an error
// carrying the engine's answer (its reason).
func (l *Loader) post(ctx context.Context, address, path string, body map[string]string) error {
	js, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+address+path, bytes.NewReader(js))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := l.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s on %s: %w", path, address, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s on %s: status %d: %s", path, address, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}
