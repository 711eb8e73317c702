// Package pdsidecar is a routing sidecar for prefill/decode
// disaggregation that speaks llm-d's protocol (its routing sidecar's NIXL
// v2 connector). It runs beside a decode engine and takes that engine's
// traffic:
//
//   - A request without the x-prefiller-host-port header goes to the
//     local engine unchanged (aggregated serving).
//   - With the header (ip:port; the first of a comma-separated list), the
//     sidecar first sends the prefiller the request with max_tokens (and
//     max_completion_tokens, when set) 1, stream off and
//     kv_transfer_params {"do_remote_decode": true, ...}; then it sends the
//     local engine the original request carrying the kv_transfer_params the
//     prefiller answered with, and streams that answer to the client.
//   - When the prefiller cannot be reached, fails, times out or answers
//     without kv_transfer_params, the local engine serves the original
//     request by itself: a disaggregation that fails costs the prefill
//     time, never the request. (llm-d's sidecar returns the prefiller's
//     error instead.)
//
// Every answer carries x-pd-served: disaggregated, aggregated or fallback.
package pdsidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Header names of the protocol.
const (
	// PrefillerHeader names the prefill worker, ip:port, as llm-d's router
	// and ours set it.
	PrefillerHeader = "x-prefiller-host-port"
	// ServedHeader tells how the sidecar served a request.
	ServedHeader = "x-pd-served"
)

// How a request was served (ServedHeader).
const (
	ServedDisaggregated = "disaggregated"
	ServedAggregated    = "aggregated"
	ServedFallback      = "fallback"
)

// maxBody bounds a request body the sidecar reads.
const maxBody = 64 << 20

// Config is a sidecar's settings.
type Config struct {
	// Decoder is the local decode engine's base URL.
	Decoder string
	// PrefillTimeout bounds the prefill request; past it the local engine
	// serves the request.
	PrefillTimeout time.Duration
	Log            *zap.Logger
}

// Counts are the requests served each way since start.
type Counts struct {
	Disaggregated, Aggregated, Fallback uint64
}

// Sidecar is the handler; it is safe for concurrent use.
type Sidecar struct {
	cfg     Config
	decoder *httputil.ReverseProxy
	client  *http.Client
	counts  [3]atomic.Uint64
}

// New builds a sidecar for cfg.
func New(cfg Config) (*Sidecar, error) {
	u, err := url.Parse(cfg.Decoder)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("decoder %q: want a base URL such as http://127.0.0.1:8200", cfg.Decoder)
	}
	if cfg.PrefillTimeout <= 0 {
		return nil, errors.New("prefill timeout must be > 0")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1, // streams flush every event
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			cfg.Log.Warn("decoder unreachable", zap.Error(err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return &Sidecar{cfg: cfg, decoder: rp, client: &http.Client{}}, nil
}

// Counts returns how many requests were served each way.
func (s *Sidecar) Counts() Counts {
	return Counts{s.counts[0].Load(), s.counts[1].Load(), s.counts[2].Load()}
}

// Handler serves the OpenAI completion endpoints by the protocol and
// passes everything else to the decoder.
func (s *Sidecar) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.Handle("/", s.decoder)
	return mux
}

// prefiller is the first ip:port the header names, or "".
func prefiller(h http.Header) string {
	for _, v := range h.Values(PrefillerHeader) {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				return strings.TrimPrefix(p, "http://")
			}
		}
	}
	return ""
}

func (s *Sidecar) complete(w http.ResponseWriter, r *http.Request) {
	target := prefiller(r.Header)
	r.Header.Del(PrefillerHeader)
	if target == "" {
		s.serve(w, r, nil, ServedAggregated)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		// Not ours to judge: the engine answers a bad body as it would.
		s.serve(w, r, body, ServedAggregated)
		return
	}
	kv, err := s.prefill(r, target, req)
	if err != nil {
		s.cfg.Log.Warn("prefill failed, serving locally", zap.String("prefiller", target), zap.Error(err))
		s.serve(w, r, body, ServedFallback)
		return
	}
	req["kv_transfer_params"] = kv
	decode, err := json.Marshal(req)
	if err != nil {
		s.serve(w, r, body, ServedFallback)
		return
	}
	s.serve(w, r, decode, ServedDisaggregated)
}

// serve sends r to the decoder with body (nil: r's own) and counts how.
func (s *Sidecar) serve(w http.ResponseWriter, r *http.Request, body []byte, how string) {
	switch how {
	case ServedDisaggregated:
		s.counts[0].Add(1)
	case ServedAggregated:
		s.counts[1].Add(1)
	default:
		s.counts[2].Add(1)
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Length")
	}
	w.Header().Set(ServedHeader, how)
	s.decoder.ServeHTTP(w, r)
}

// prefill runs req's prefill on target and returns the kv_transfer_params
// it answered with.
func (s *Sidecar) prefill(r *http.Request, target string, req map[string]json.RawMessage) (json.RawMessage, error) {
	pre := make(map[string]json.RawMessage, len(req)+1)
	for k, v := range req {
		pre[k] = v
	}
	one := json.RawMessage("1")
	pre["max_tokens"] = one
	if _, ok := pre["max_completion_tokens"]; ok {
		pre["max_completion_tokens"] = one
	}
	pre["stream"] = json.RawMessage("false")
	delete(pre, "stream_options")
	pre["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,` +
		`"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)
	body, err := json.Marshal(pre)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PrefillTimeout)
	defer cancel()
	// The target is the prefiller the router named, as in llm-d's
	// sidecar; only the router's traffic should reach the sidecar.
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+target+r.URL.Path, bytes.NewReader(body)) //nolint:gosec // G704: the router names the prefiller
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Accept-Encoding" {
			continue
		}
		out.Header[k] = vs
	}
	out.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(out) //nolint:gosec // G704: the router names the prefiller
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read prefill answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("prefiller answered %d", resp.StatusCode)
	}
	var got struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(answer, &got); err != nil {
		return nil, fmt.Errorf("prefill answer: %w", err)
	}
	if len(got.KV) == 0 || string(got.KV) == "null" {
		return nil, errors.New("prefill answer has no kv_transfer_params")
	}
	return got.KV, nil
}
