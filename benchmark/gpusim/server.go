package gpusim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Server is the HTTP face of one simulated GPU.
type Server struct {
	cfg      Config
	eng      *Engine
	log      *zap.Logger
	loadedAt time.Time
	started  time.Time

	rngMu sync.Mutex
	rng   *rand.Rand

	nextID   atomic.Uint64
	blockIDs atomic.Uint64 // block ids handed to decode workers
	tickets  atomic.Int64  // inference requests started
	served   atomic.Uint64 // inference responses answered
	exitOnce sync.Once
	exited   chan struct{}
}

// NewServer builds the server of one GPU; cfg must be valid. The loading
// period of cfg starts now.
func NewServer(cfg Config, log *zap.Logger) (*Server, error) {
	eng, err := newEngine(cfg, realClock{start: time.Now()})
	if err != nil {
		return nil, err
	}
	seed := uint64(cfg.Seed)
	return &Server{
		cfg: cfg, eng: eng, log: log.With(zap.String("gpu", cfg.ID)),
		loadedAt: time.Now().Add(time.Duration(cfg.LoadingMs) * time.Millisecond),
		started:  time.Now(),
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		exited:   make(chan struct{}),
	}, nil
}

// Engine returns the simulated GPU behind the server.
func (s *Server) Engine() *Engine { return s.eng }

// Run drives the GPU in real time until ctx ends.
func (s *Server) Run(ctx context.Context) { s.eng.Run(ctx) }

// Exited is closed once the server has answered --exit-after requests.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Handler serves the GPU's HTTP API. Every response carries x-gpusim-id,
// and x-gpusim-traceparent when the request carried a W3C traceparent
// (the trace context an engine would continue), so that a test can see
// what reached the worker.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.inference(kindChat))
	mux.HandleFunc("POST /v1/completions", s.inference(kindCompletion))
	mux.HandleFunc("POST /completion", s.inference(kindLlama))
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /admin/config", s.getConfig)
	mux.HandleFunc("POST /admin/config", s.postConfig)
	mux.HandleFunc("GET /admin/state", s.state)
	if s.cfg.MaxLoras > 0 {
		mux.HandleFunc("POST /v1/load_lora_adapter", s.loadAdapter)
		mux.HandleFunc("POST /v1/unload_lora_adapter", s.unloadAdapter)
	}
	if s.cfg.Slots > 0 {
		mux.HandleFunc("GET /slots", s.slots)
		mux.HandleFunc("GET /props", s.props)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-gpusim-id", s.cfg.ID)
		if tp := r.Header.Get("traceparent"); tp != "" {
			w.Header().Set("x-gpusim-traceparent", tp)
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) loading() bool { return time.Now().Before(s.loadedAt) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, err error) {
	status, body := errorStatus(err)
	writeJSON(w, status, body)
}

// inject draws whether this request fails by the configured error rate.
func (s *Server) inject() bool {
	rate := s.eng.Knobs().ErrorRate
	if rate <= 0 {
		return false
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < rate
}

// admitTicket enforces --exit-after: requests past the Nth are dropped
// without an answer, as by a process that is exiting.
func (s *Server) admitTicket(w http.ResponseWriter) bool {
	if s.cfg.ExitAfter == 0 || s.tickets.Add(1) <= int64(s.cfg.ExitAfter) {
		return true
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return false
	}
	writeError(w, errInjected)
	return false
}

// answered counts a finished inference response and triggers the exit
// after the Nth.
func (s *Server) answered() {
	n := s.served.Add(1)
	if s.cfg.ExitAfter > 0 && n >= uint64(s.cfg.ExitAfter) {
		s.exitOnce.Do(func() { close(s.exited) })
	}
}

func (s *Server) inference(kind apiKind) http.HandlerFunc {
	prefix := map[apiKind]string{kindChat: "chatcmpl-", kindCompletion: "cmpl-", kindLlama: "llama-"}[kind]
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.admitTicket(w) {
			return
		}
		defer s.answered()
		if s.loading() {
			writeError(w, errLoading)
			return
		}
		req, err := parseInference(kind, w, r, s.servedModels())
		if err == nil && s.inject() {
			err = errInjected
		}
		if err != nil {
			writeError(w, err)
			return
		}
		kv := s.kvTransfer(r, &req)
		st, err := s.eng.Submit(req.Request)
		if err != nil {
			writeError(w, err)
			return
		}
		defer st.Close() // frees the KV at once if the client left
		rs := responder{
			kind: kind, req: req, created: time.Now().Unix(), kv: kv,
			id: fmt.Sprintf("%s%d", prefix, s.nextID.Add(1)),
		}
		switch {
		case req.stream && s.cfg.StreamSummary:
			s.streamSummary(w, r, rs, st)
			return
		case req.stream:
			s.stream(w, r, rs, st)
			return
		}
		n := 0
		for {
			k, done, err := st.Next(r.Context())
			if err != nil {
				return
			}
			n += k
			if done {
				break
			}
		}
		writeJSON(w, http.StatusOK, rs.whole(n))
	}
}

// stream writes one SSE event per token, flushed as soon as it exists.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, rs responder, st *Stream) {
	rc, ok := startSSE(w)
	if !ok {
		return
	}
	first, next := rs.tokenEvent(true), rs.tokenEvent(false)
	n := 0
	for {
		k, done, err := st.Next(r.Context())
		if err != nil {
			return
		}
		for range k {
			ev := next
			if n == 0 {
				ev = first
			}
			n++
			if _, err := w.Write(ev); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if done {
			break
		}
	}
	writeEnd(w, rc, rs.endEvents(n, nil))
}

// writeEnd writes the events after the last token and flushes them.
func writeEnd(w http.ResponseWriter, rc *http.ResponseController, events [][]byte) {
	for _, ev := range events {
		if _, err := w.Write(ev); err != nil {
			return
		}
	}
	_ = rc.Flush()
}

// streamSummary is --stream-summary's stream: the first token's event as
// soon as it exists, then nothing until the end, when one event carries
// the other tokens and the usage chunk the engine's gaps between tokens.
// A benchmark replaying 100k requests through Envoy on two cores spends
// its CPU on per-token events otherwise; TTFT and the inter-token latency
// stay measurable.
func (s *Server) streamSummary(w http.ResponseWriter, r *http.Request, rs responder, st *Stream) {
	rc, ok := startSSE(w)
	if !ok {
		return
	}
	n := 0
	for {
		k, done, err := st.Next(r.Context())
		if err != nil {
			return
		}
		if n == 0 && k > 0 {
			if _, err := w.Write(rs.tokenEvent(true)); err != nil || rc.Flush() != nil {
				return
			}
		}
		n += k
		if done {
			break
		}
	}
	if n > 1 {
		if _, err := w.Write(rs.textEvent(tokensText(n-1), false)); err != nil {
			return
		}
	}
	gaps := st.TokenGaps()
	itl := make([]int64, len(gaps))
	for i, g := range gaps {
		itl[i] = g.Microseconds()
	}
	writeEnd(w, rc, rs.endEvents(n, itl))
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	// vLLM's model cards: root is the weights' path, parent the base
	// model of an adapter (null for a base model).
	type model struct {
		ID      string  `json:"id"`
		Object  string  `json:"object"`
		Created int64   `json:"created"`
		OwnedBy string  `json:"owned_by"`
		Root    string  `json:"root"`
		Parent  *string `json:"parent"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	created := s.loadedAt.Unix()
	for _, m := range s.cfg.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: created, OwnedBy: "gpusim", Root: m})
	}
	base := s.cfg.Models[0]
	for _, a := range s.eng.Adapters() {
		list.Data = append(list.Data, model{ID: a.Name, Object: "model", Created: created, OwnedBy: "gpusim", Root: a.Path, Parent: &base})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.loading() {
		writeError(w, errLoading)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	sn := s.eng.snapshot()
	sn.ServedTotal = s.served.Load()
	sn.startedUnix = float64(s.started.UnixMilli()) / 1000
	sn.nowUnix = float64(time.Now().UnixMilli()) / 1000
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(renderMetrics(s.cfg.MetricsFormat, sn))
}

func (s *Server) state(w http.ResponseWriter, _ *http.Request) {
	st := s.eng.State()
	st.ServedTotal = s.served.Load()
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.eng.Knobs())
}

// postConfig applies any subset of the knobs.
func (s *Server) postConfig(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Slowdown        *float64 `json:"slowdown"`
		ErrorRate       *float64 `json:"error_rate"`
		TTFTMs          *float64 `json:"ttft_ms"`
		TokensPerSecond *float64 `json:"tokens_per_second"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	k := s.eng.Knobs()
	var errs []error
	set := func(dst *float64, v *float64, name string, ok func(float64) bool) {
		if v == nil {
			return
		}
		if !ok(*v) {
			errs = append(errs, fmt.Errorf("%s out of range: %v", name, *v))
			return
		}
		*dst = *v
	}
	set(&k.Slowdown, in.Slowdown, "slowdown", func(v float64) bool { return v > 0 })
	set(&k.ErrorRate, in.ErrorRate, "error_rate", func(v float64) bool { return v >= 0 && v <= 1 })
	set(&k.TTFTMs, in.TTFTMs, "ttft_ms", func(v float64) bool { return v >= 0 })
	set(&k.TokensPerSecond, in.TokensPerSecond, "tokens_per_second", func(v float64) bool { return v >= 0 })
	if err := errors.Join(errs...); err != nil {
		writeError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	s.eng.SetKnobs(k)
	s.log.Info("admin config changed", zap.Float64("slowdown", k.Slowdown), zap.Float64("error_rate", k.ErrorRate),
		zap.Float64("ttft_ms", k.TTFTMs), zap.Float64("tokens_per_second", k.TokensPerSecond))
	writeJSON(w, http.StatusOK, k)
}

func (s *Server) slots(w http.ResponseWriter, _ *http.Request) {
	type slot struct {
		ID           int  `json:"id"`
		NCtx         int  `json:"n_ctx"`
		IsProcessing bool `json:"is_processing"`
	}
	sn := s.eng.snapshot()
	out := make([]slot, len(sn.slotProcessing))
	for i, busy := range sn.slotProcessing {
		out[i] = slot{ID: i, NCtx: sn.slotCtx, IsProcessing: busy}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) props(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"total_slots":                 s.cfg.Slots,
		"model_path":                  s.cfg.Models[0],
		"default_generation_settings": map[string]any{"n_ctx": s.cfg.CtxSize},
	})
}

// startSSE sends a stream's headers and flushes them; false when the client
// is gone.
func startSSE(w http.ResponseWriter) (*http.ResponseController, bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return rc, rc.Flush() == nil
}
