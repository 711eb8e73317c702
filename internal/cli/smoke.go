package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// SmokeOptions configure a smoke test of a running stack.
type SmokeOptions struct {
	URL    string // the Envoy listener, e.g. http://127.0.0.1:8080
	Model  string // a model to ask for (default: the first /v1/models lists)
	APIKey string // sent as a Bearer token when the router checks API keys
	Admin  string // a router admin URL: also check /health and explain a request
	HTTP   *http.Client
}

// smokeStep is one check: it returns what it saw, or why it failed.
type smokeStep struct {
	name string
	run  func(context.Context) (string, error)
}

// smokeRun carries one run's state between its steps.
type smokeRun struct {
	o         SmokeOptions
	hc        *http.Client
	requestID string
}

// Smoke checks a running stack the way a client sees it: the model list, a
// completion, a stream to [DONE], that bad input gets an OpenAI-style error
// with the right status, that a client's routing header is not obeyed, and
// (with Admin) the router's health and the decision for a request. It
// prints one line per check and fails when any check fails.
func Smoke(ctx context.Context, o SmokeOptions, w io.Writer) error {
	r := &smokeRun{o: o, hc: o.HTTP}
	if r.hc == nil {
		r.hc = &http.Client{Timeout: 60 * time.Second}
	}
	r.o.URL = strings.TrimSuffix(o.URL, "/")
	steps := []smokeStep{
		{"GET /v1/models lists the model", r.models},
		{"a completion is served by a worker the router chose", r.completion},
		{"a stream runs to data: [DONE]", r.stream},
		{"malformed JSON gets 400 invalid_request_error", r.badJSON},
		{"an unknown model gets 404 model_not_found", r.unknownModel},
		{"a client's x-llm-cluster header is ignored", r.clientCluster},
	}
	if o.Admin != "" {
		steps = append(steps,
			smokeStep{"the router's /health is ok", r.health},
			smokeStep{"the router explains the completion", r.explain},
		)
	}
	failed := 0
	for _, s := range steps {
		start := time.Now()
		detail, err := s.run(ctx)
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			failed++
			fmt.Fprintf(w, "FAIL  %-52s %s (%s)\n", s.name, err, took)
			continue
		}
		fmt.Fprintf(w, "ok    %-52s %s (%s)\n", s.name, detail, took)
	}
	if failed > 0 {
		return fmt.Errorf("smoke: %d of %d checks failed against %s", failed, len(steps), r.o.URL)
	}
	fmt.Fprintf(w, "smoke: all %d checks passed against %s\n", len(steps), r.o.URL)
	return nil
}

// post sends a chat completion body with extra headers.
func (r *smokeRun) post(ctx context.Context, body string, headers map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad --url %q: %w", r.o.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.APIKey)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from %s: %w", r.o.URL, err)
	}
	return resp, nil
}

func (r *smokeRun) chat(stream bool) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"smoke test: say hi"}],"max_tokens":8,"stream":%v}`, r.o.Model, stream)
}

// served checks the routing headers of a 200 answer and names the worker.
func served(resp *http.Response) (string, error) {
	if resp.Header.Get("x-llm-fail-open") == "true" {
		return "", errors.New("served fail-open: Envoy routed it by model because no router replica answered")
	}
	node := resp.Header.Get("x-routed-node")
	if node == "" {
		return "", errors.New("no x-routed-node header: did the request pass through the router?")
	}
	return node, nil
}

// readBody reads at most 1 MiB.
func readBody(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return string(b)
}

func (r *smokeRun) models(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.o.URL+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("bad --url %q: %w", r.o.URL, err)
	}
	if r.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.APIKey)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("no answer from %s: %w", r.o.URL, err)
	}
	body := readBody(resp)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(body))
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) == 0 {
		return "", fmt.Errorf("no models in %q", body)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if r.o.Model == "" {
		r.o.Model = ids[0]
	} else if !slices.Contains(ids, r.o.Model) {
		return "", fmt.Errorf("model %q not among %s", r.o.Model, strings.Join(ids, ", "))
	}
	return fmt.Sprintf("%s; using %s", strings.Join(ids, ", "), r.o.Model), nil
}

func (r *smokeRun) completion(ctx context.Context) (string, error) {
	resp, err := r.post(ctx, r.chat(false), nil)
	if err != nil {
		return "", err
	}
	body := readBody(resp)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(body))
	}
	var c struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Choices) == 0 {
		return "", fmt.Errorf("not a chat completion: %q", body)
	}
	node, err := served(resp)
	if err != nil {
		return "", err
	}
	r.requestID = resp.Header.Get("x-request-id")
	return fmt.Sprintf("served by %s, request %s", node, r.requestID), nil
}

func (r *smokeRun) stream(ctx context.Context) (string, error) {
	resp, err := r.post(ctx, r.chat(true), nil)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(readBody(resp)))
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return "", fmt.Errorf("content type %q, want text/event-stream", ct)
	}
	events, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			events++
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("stream cut after %d events: %w", events, err)
	}
	if !done {
		return "", fmt.Errorf("stream ended after %d events without data: [DONE]", events)
	}
	node, err := served(resp)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d events from %s", events, node), nil
}

// wantError checks an OpenAI-style error answer.
func (r *smokeRun) wantError(ctx context.Context, body string, status int, code string) (string, error) {
	resp, err := r.post(ctx, body, nil)
	if err != nil {
		return "", err
	}
	raw := readBody(resp)
	var e struct {
		Error struct {
			Message, Type string
			Code          *string
		} `json:"error"`
	}
	if resp.StatusCode != status {
		return "", fmt.Errorf("HTTP %d, want %d: %s", resp.StatusCode, status, strings.TrimSpace(raw))
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Error.Message == "" || e.Error.Code == nil || *e.Error.Code != code {
		return "", fmt.Errorf("not an OpenAI error with code %s: %s", code, strings.TrimSpace(raw))
	}
	return fmt.Sprintf("HTTP %d %s: %s", status, code, e.Error.Message), nil
}

func (r *smokeRun) badJSON(ctx context.Context) (string, error) {
	return r.wantError(ctx, `{"model": "`+r.o.Model+`", "messages": [`, 400, "invalid_request")
}

func (r *smokeRun) unknownModel(ctx context.Context) (string, error) {
	return r.wantError(ctx, `{"model":"llm-router-smoke-no-such-model","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, 404, "model_not_found")
}

// clientCluster sends a request naming an upstream cluster that does not
// exist: if Envoy obeyed the client's header, it would fail with 503.
func (r *smokeRun) clientCluster(ctx context.Context) (string, error) {
	resp, err := r.post(ctx, r.chat(false), map[string]string{"x-llm-cluster": "llm-router-smoke-no-such-cluster"})
	if err != nil {
		return "", err
	}
	body := readBody(resp)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d (the client's header may have been obeyed): %s", resp.StatusCode, strings.TrimSpace(body))
	}
	node, err := served(resp)
	if err != nil {
		return "", err
	}
	return "served by " + node, nil
}

func (r *smokeRun) health(ctx context.Context) (string, error) {
	c := &Client{Base: r.o.Admin, HTTP: r.hc}
	var h struct {
		Status   string `json:"status"`
		Strategy string `json:"strategy"`
	}
	if err := c.do(ctx, http.MethodGet, "/health", nil, &h); err != nil {
		return "", err
	}
	if h.Status != "ok" {
		return "", fmt.Errorf("status %q", h.Status)
	}
	return "strategy " + h.Strategy, nil
}

func (r *smokeRun) explain(ctx context.Context) (string, error) {
	if r.requestID == "" {
		return "", errors.New("no request id from the completion check")
	}
	c := &Client{Base: r.o.Admin, HTTP: r.hc}
	// The decision may reach the shared log a moment after the answer.
	var last error
	for i := 0; i < 20; i++ {
		dec, err := c.Explain(ctx, r.requestID)
		if err == nil {
			return fmt.Sprintf("%s -> %s with %s", dec.Outcome, dec.Worker, dec.Strategy), nil
		}
		last = err
		if !errors.Is(err, ErrNotFound) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", last
}
