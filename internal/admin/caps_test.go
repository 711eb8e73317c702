package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// A learned limit, and the tokens the worker's claims hold, show in its
// status (GET /v1/workers/{id}, and so `llm-router workers`).
func TestLearnedLimitShowsInTheWorker(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(ctx, []state.WorkerSpec{{ID: "w", Address: "10.0.0.1:8000", Models: []string{"m"}, MaxConcurrency: 8}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := store.PutLimits(ctx, map[string]state.Limit{"w": caps.Limit{Value: 3, Estimate: 3.4, Gradient: 0.6, BaseTTFT: 0.12, BaseITL: 0.02, Updated: at, Tokens: 5000, TokenEstimate: 5000.5}.State()}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, state.ClaimRequest{
		ID: "c1", Candidates: []state.Candidate{{Worker: "w", Cap: 8}}, Prompt: scoring.Prompt{PromptTokens: 100, DecodeTokens: 50},
	}); err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(store, scheduler.Options{Strategy: scoring.Scored})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	svc := New(store, sched, noExplain{}, Options{Replica: "r"})
	mux := http.NewServeMux()
	svc.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, out := call(t, srv, "GET", "/v1/workers/w", "", "")
	w, _ := out["worker"].(map[string]any)
	if w == nil {
		w = out
	}
	l, _ := w["learnedLimit"].(map[string]any)
	if l == nil || l["value"] != 3.0 || l["gradient"] != 0.6 || l["baseTtftSeconds"] != 0.12 || l["updated"] != "2026-01-02T03:04:05Z" || l["tokens"] != "5000" {
		t.Fatalf("learned limit in the worker status: %v", out)
	}
	if w["prefillTokens"] != 100.0 || w["decodeTokens"] != 50.0 {
		t.Fatalf("in-flight tokens in the worker status: %v", out)
	}
}
