package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llm-router/llm-router/internal/admin/admintest"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/test/stack"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the rendered output")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func closedURL(t *testing.T) string {
	t.Helper()
	addr, err := stack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestClientErrors: every way an admin answer can go wrong becomes an
// error that says which, with the kinds callers test for.
func TestClientErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string // "" wants the answer decoded
		wantIs  error
	}{
		{"ok", 200, `{"status":"ok","strategy":"scored"}`, "", nil},
		{"not found", 404, `{"error":{"code":"not_found","message":"no such thing"}}`, "not found: no such thing", ErrNotFound},
		{"unauthorised", 401, `{"error":{"code":"UNAUTHENTICATED","message":"missing token"}}`, "unauthorised: pass the admin token", ErrUnauthorised},
		{"forbidden", 403, `{"error":{"code":"PERMISSION_DENIED","message":"no token configured"}}`, "unauthorised", ErrUnauthorised},
		{"store error", 502, `{"error":{"code":"store_error","message":"redis: i/o timeout"}}`, "GET /health: 502 Bad Gateway: redis: i/o timeout", nil},
		{"a flat message", 500, `{"message":"flat"}`, "GET /health: 500 Internal Server Error: flat", nil},
		{"not JSON", 503, "upstream connect error\n", "GET /health: 503 Service Unavailable: upstream connect error", nil},
		{"bad JSON on 200", 200, `{"status":`, "decode answer from", nil},
		{"HTML on 200", 200, `<html>hi</html>`, "decode answer from", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var auth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth = r.Header.Get("Authorization")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := &Client{Base: srv.URL + "/", Token: "tok"}
			var out struct{ Status, Strategy string }
			err := c.do(context.Background(), http.MethodGet, "/health", nil, &out)
			if auth != "Bearer tok" {
				t.Errorf("Authorization %q, want the token as Bearer", auth)
			}
			if tc.wantErr == "" {
				if err != nil || out.Status != "ok" || out.Strategy != "scored" {
					t.Fatalf("%v %+v", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("error %v is not %v", err, tc.wantIs)
			}
		})
	}
}

// TestClientTransportErrors: no listener, a malformed URL and a router
// that does not answer in time each say so.
func TestClientTransportErrors(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	dead := closedURL(t)
	tests := []struct {
		name    string
		c       *Client
		wantErr string
	}{
		{"connection refused", &Client{Base: dead}, "connection refused: no router admin listening at " + dead},
		{"malformed URL", &Client{Base: "http://[::1"}, `bad --admin URL "http://[::1"`},
		{"timeout", &Client{Base: hung.URL, HTTP: &http.Client{Timeout: 100 * time.Millisecond}}, "timed out talking to " + hung.URL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Explain(context.Background(), "r-1")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

// TestExplainAgainstTheAdminAPI: Explain decodes the record the admin API
// serves, and names a request it does not know.
func TestExplainAgainstTheAdminAPI(t *testing.T) {
	f := admintest.TypicalFleet()
	c := &Client{Base: admintest.Serve(t, f, "").URL}
	d, err := c.Explain(context.Background(), admintest.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := f.Explain(context.Background(), admintest.RequestID)
	var got, exp bytes.Buffer
	_ = PrintJSON(&got, d)
	_ = PrintJSON(&exp, want)
	if got.String() != exp.String() {
		t.Fatalf("decoded\n%s\nserved\n%s", got.String(), exp.String())
	}
	_, err = c.Explain(context.Background(), "a/b c")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `no decision recorded for request "a/b c"`) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestRPCErrors: the gRPC codes the admin service answers with become the
// same errors as their HTTP statuses.
func TestRPCErrors(t *testing.T) {
	c := &Client{Base: "http://127.0.0.1:1"}
	tests := []struct {
		err     error
		wantErr string
		wantIs  error
	}{
		{nil, "", nil},
		{status.Error(codes.NotFound, `unknown worker "x"`), `not found: unknown worker "x"`, ErrNotFound},
		{status.Error(codes.Unauthenticated, "missing token"), "unauthorised", ErrUnauthorised},
		{status.Error(codes.PermissionDenied, "no token configured"), "unauthorised", ErrUnauthorised},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "timed out talking to http://127.0.0.1:1", nil},
		{status.Error(codes.Unavailable, "dial tcp 127.0.0.1:1: connect: connection refused"), "connection refused: no router admin listening at http://127.0.0.1:1", nil},
		{status.Error(codes.Unavailable, "a-0: redis down"), "unavailable: a-0: redis down", nil},
		{status.Error(codes.InvalidArgument, "spec.models: at least one model is required"), "invalidargument: spec.models", nil},
		{errors.New("plain"), "unknown: plain", nil},
	}
	for _, tc := range tests {
		err := c.rpcError(tc.err)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("rpcError(nil) = %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
			t.Errorf("rpcError(%v) = %v, want %q (%v)", tc.err, err, tc.wantErr, tc.wantIs)
		}
	}
}

// TestPrintDecision renders the decisions explain meets besides the
// typical one (cmd/llm-router's golden): each line appears only when its
// data is there.
func TestPrintDecision(t *testing.T) {
	at := admintest.At
	tests := []struct {
		name string
		d    scheduler.Decision
	}{
		{"running", scheduler.Decision{
			RequestID: "r-run", Time: at, Replica: "r1", Model: "m", Priority: "critical", MaxTokens: 16, PromptTokens: 9,
			Strategy: "least_loaded", Outcome: scheduler.OutcomeClaimed, Worker: "w1", SnapshotAge: 0.002,
			SLO: scheduler.SLO{
				TTFT: scheduler.NewObjective(750*time.Millisecond, scheduler.SLOHeader),
				TPOT: scheduler.NewObjective(40*time.Millisecond, scheduler.SLOConfig),
			},
			Candidates: []scoring.Line{{Worker: "w1", Active: 0, Cap: 2, ActiveWeight: 1, Total: 0}},
		}},
		{"fallback, retried, client left", scheduler.Decision{
			RequestID: "r-retry", Time: at, Replica: "r2", Model: "m", Priority: "batch", MaxTokens: 100, Stream: true,
			Strategy: "scored", Fallback: "round_robin", Outcome: scheduler.OutcomeClaimed, Worker: "w1", DecideMicros: 12,
			SLO: scheduler.SLO{
				TTFT: scheduler.NewObjective(5*time.Second, scheduler.SLOObjective),
				TPOT: scheduler.NewObjective(100*time.Millisecond, scheduler.SLODefault),
			},
			Candidates: []scoring.Line{
				{Worker: "w1", Active: 1, Cap: 2, Terms: []scoring.Term{{Name: "latency", Unknown: true}}, Total: 1},
				{Worker: "w2", Active: 0, Cap: 2, Terms: []scoring.Term{{Name: "latency", Unknown: true}}, Total: 0},
			},
			Result: &scheduler.Result{Status: 200, ServedBy: "w2", LatencySeconds: 0.75, Aborted: true},
		}},
		{"at capacity", scheduler.Decision{
			RequestID: "r-full", Time: at, Replica: "r1", Model: "m", Priority: "standard", Strategy: "scored",
			Outcome: scheduler.OutcomeAtCapacity, SnapshotAge: 0.1,
			Candidates: []scoring.Line{{Worker: "w1", Active: 2, Cap: 2, Full: true, Total: scoring.Infinite}},
			Result:     &scheduler.Result{Status: 429, LatencySeconds: 0.001},
		}},
		{"predicted, within its objectives", scheduler.Decision{
			RequestID: "r-pred", Time: at, Replica: "r1", Model: "m", Priority: "standard", MaxTokens: 100, PromptTokens: 900, Stream: true,
			Strategy: scoring.Predicted, Outcome: scheduler.OutcomeClaimed, Worker: "w1", DecideMicros: 40,
			SLO: scheduler.SLO{
				TTFT: scheduler.NewObjective(time.Second, scheduler.SLOHeader),
				TPOT: scheduler.NewObjective(50*time.Millisecond, scheduler.SLODefault),
			},
			Prediction: &scheduler.Prediction{TTFTSeconds: 0.42, TPOTSeconds: 0.021, TPOTUnknown: true, CeilingSeconds: 0.95},
			Unknown:    []string{"predicted_tpot"},
			Candidates: []scoring.Line{{Worker: "w1", Active: 1, Cap: 64, ActiveWeight: 0.1, Total: 2.52, Terms: []scoring.Term{
				{Name: "predicted_ttft", Value: 0.4}, {Name: "predicted_tpot", Value: 0.021, Unknown: true}, {Name: "ttft_prefill", Weight: 0.0002, Value: 1400},
			}}},
			Result: &scheduler.Result{
				Status: 200, ServedBy: "w1", LatencySeconds: 2.6, TTFTSeconds: 0.4, TokensPerSecond: 45, CompletionTokens: 100,
				TPOTSeconds: 0.0222, TTFTError: 0.05, TPOTError: 0.054,
			},
		}},
		{"predicted, objective unattainable", scheduler.Decision{
			RequestID: "r-slo", Time: at, Replica: "r1", Model: "m", Priority: "batch", Strategy: scoring.Predicted,
			Outcome: scheduler.OutcomeObjectiveUnmet, SLO: scheduler.SLO{
				TTFT: scheduler.NewObjective(200*time.Millisecond, scheduler.SLOHeader),
				TPOT: scheduler.NewObjective(50*time.Millisecond, scheduler.SLODefault),
			},
			Prediction: &scheduler.Prediction{TTFTSeconds: 0.55},
		}},
		{"no healthy worker", scheduler.Decision{
			RequestID: "r-none", Time: at, Replica: "r1", Model: "m", Priority: "standard", Strategy: "scored",
			Outcome: scheduler.OutcomeNoHealthy, Excluded: []scoring.Excluded{{Worker: "w1", Reason: "unhealthy"}, {Worker: "w2", Reason: "draining"}},
		}},
	}
	var all bytes.Buffer
	for _, tc := range tests {
		all.WriteString("== " + tc.name + "\n")
		PrintDecision(&all, &tc.d)
	}
	golden(t, "decisions.txt", all.String())
}
