// Package admin serves the router's admin port, one surface: /health and
// /metrics; the native API of proto/llmrouter/v1 (the fleet's workers with
// their live state, registration with leases kept by heartbeats, drains,
// decisions explained, stats) over gRPC and, through its grpc-gateway
// mapping, as HTTP/JSON under /v1/; and two endpoints kept for existing
// scripts and an earlier router's clients: /stats (the fleet in snake_case;
// /v1/stats is the API's) and /decisions/{request_id} (the decision
// record as the scheduler logs it; /v1/decisions/{request_id} is the API's).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/decisions"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Source is what the admin endpoints read.
type Source interface {
	Snapshot() state.Snapshot
	Strategy() string
}

// Status reports the replica's own condition.
type Status interface {
	// Status is "ok", "degraded" (shared store unreachable, routing on local
	// state) or "draining" (shutting down).
	Status() string
	// Auth describes whether API keys are required.
	Auth() string
}

// Explainer finds the decision made for a request id, on any replica.
type Explainer interface {
	Explain(ctx context.Context, requestID string) (*scheduler.Decision, error)
}

// Handler returns the admin mux.
func Handler(src Source, st Status, ex Explainer, replica string, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /decisions/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := ex.Explain(r.Context(), r.PathValue("id"))
		switch {
		case errors.Is(err, decisions.ErrNotFound):
			writeJSON(w, http.StatusNotFound, errorBody("not_found", err.Error()))
		case err != nil:
			writeJSON(w, http.StatusBadGateway, errorBody("store_error", err.Error()))
		default:
			writeJSON(w, http.StatusOK, d)
		}
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		snap := src.Snapshot()
		type worker struct {
			ID       string         `json:"id"`
			Health   scoring.Health `json:"health"`
			Draining bool           `json:"draining"`
			InFlight int            `json:"in_flight"`
		}
		type queue struct {
			Model    string `json:"model"`
			Critical int    `json:"critical"`
			Standard int    `json:"standard"`
			Batch    int    `json:"batch"`
		}
		out := struct {
			Status   string   `json:"status"`
			Strategy string   `json:"strategy"`
			Replica  string   `json:"replica"`
			Auth     string   `json:"auth"`
			Workers  []worker `json:"workers"`
			Queues   []queue  `json:"queues"`
		}{Status: st.Status(), Strategy: src.Strategy(), Replica: replica, Auth: st.Auth(), Workers: []worker{}, Queues: []queue{}}
		for _, q := range snap.Queues {
			out.Queues = append(out.Queues, queue{q.Model, q.Critical, q.Standard, q.Batch})
		}
		for _, w := range snap.Workers {
			out.Workers = append(out.Workers, worker{w.Spec.ID, w.Health, w.Draining, w.InFlight})
		}
		code := http.StatusOK
		if out.Status == "draining" {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, out)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		snap := src.Snapshot()
		type worker struct {
			ID       string         `json:"id"`
			Address  string         `json:"address"`
			Models   []string       `json:"models"`
			Zone     string         `json:"zone,omitempty"`
			Health   scoring.Health `json:"health"`
			Draining bool           `json:"draining"`
			InFlight int            `json:"in_flight"`
			// The tokens its claims hold: uncached prompt and max_tokens.
			PrefillTokens int         `json:"prefill_tokens"`
			DecodeTokens  int         `json:"decode_tokens"`
			MaxConc       ceiling     `json:"max_concurrency"`
			Stats         state.Stats `json:"moving_averages"`
			// Learned is the concurrency limit adaptive caps learned (nil:
			// none, max_concurrency applies).
			Learned *caps.Limit `json:"learned_limit,omitempty"`
			// SlowGapShare is the tail signal's last closed window: the
			// share of the engine's inter-token gaps over adaptive_caps.itl_slo.
			SlowGapShare *state.Sample `json:"slow_gap_share,omitempty"`
		}
		out := struct {
			Replica    string    `json:"replica"`
			Strategy   string    `json:"strategy"`
			SnapshotAt time.Time `json:"snapshot_at"`
			Workers    []worker  `json:"workers"`
		}{Replica: replica, Strategy: src.Strategy(), SnapshotAt: snap.At, Workers: []worker{}}
		for _, wk := range snap.Workers {
			ow := worker{
				ID: wk.Spec.ID, Address: wk.Spec.Address, Models: wk.Spec.Models, Zone: wk.Spec.Zone,
				Health: wk.Health, Draining: wk.Draining, InFlight: wk.InFlight, MaxConc: ceiling(wk.Spec.MaxConcurrency), Stats: wk.Stats,
				PrefillTokens: wk.PrefillTokens, DecodeTokens: wk.DecodeTokens,
			}
			if wk.Limit.Value > 0 {
				l := caps.FromState(wk.Limit)
				ow.Learned = &l
			}
			if s := wk.Telemetry.SlowShare; !s.At.IsZero() {
				ow.SlowGapShare = &s
			}
			out.Workers = append(out.Workers, ow)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

func errorBody(code, msg string) map[string]map[string]string {
	return map[string]map[string]string{"error": {"code": code, "message": msg}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ceiling is a configured max_concurrency in JSON: the number, or "none"
// for 0 (no cap).
type ceiling int

func (c ceiling) MarshalJSON() ([]byte, error) {
	if c <= 0 {
		return []byte(`"none"`), nil
	}
	return []byte(strconv.Itoa(int(c))), nil
}
