package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llm-router/llm-router/internal/decisions"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

type noExplain struct{}

func (noExplain) Explain(context.Context, string) (*scheduler.Decision, error) {
	return nil, decisions.ErrNotFound
}

func newTestServer(t *testing.T, dynamic bool, token string) (*httptest.Server, *memory.Store) {
	t.Helper()
	store := memory.New(nil, state.Limits{})
	_ = store.Register(context.Background(), []state.WorkerSpec{{ID: "cfg-0", Address: "10.0.0.1:8000", Models: []string{"m"}, MaxConcurrency: 2}})
	sched, err := scheduler.New(store, scheduler.Options{Strategy: scoring.Scored})
	if err != nil {
		t.Fatal(err)
	}
	_ = sched.Refresh(context.Background())
	svc := New(store, sched, noExplain{}, Options{Replica: "r", Token: token, Dynamic: dynamic, ConfigWorkers: []string{"cfg-0"}})
	mux := http.NewServeMux()
	if err := svc.Routes(mux); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, store
}

func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, raw)
	}
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

const reg = `{"spec":{"id":"dyn-1","address":"10.0.0.9:8000","models":["m"],"maxConcurrency":4},"lease":"3s"}`

func TestChangesNeedTheAdminToken(t *testing.T) {
	srv, _ := newTestServer(t, true, "tok-123")
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/workers", "", reg, 401, "UNAUTHENTICATED"},
		{"a client key is not an admin token", "POST", "/v1/workers/cfg-0:drain", "sk-client-key", "", 401, "UNAUTHENTICATED"},
		{"reads are open", "GET", "/v1/workers", "", "", 200, ""},
		{"register", "POST", "/v1/workers", "tok-123", reg, 200, ""},
		{"heartbeat", "POST", "/v1/workers/dyn-1:heartbeat", "tok-123", `{"lease":"3s"}`, 200, ""},
		{"a config worker has no lease", "POST", "/v1/workers/cfg-0:heartbeat", "tok-123", "", 404, "NOT_FOUND"},
		{"a config worker's id is taken", "POST", "/v1/workers", "tok-123", strings.Replace(reg, "dyn-1", "cfg-0", 1), 409, "ALREADY_EXISTS"},
		{"bad spec", "POST", "/v1/workers", "tok-123", `{"spec":{"id":"x y","address":"nowhere","models":[]}}`, 400, "INVALID_ARGUMENT"},
		{"bad lease", "POST", "/v1/workers", "tok-123", strings.Replace(reg, `"3s"`, `"3600s"`, 1), 400, "INVALID_ARGUMENT"},
		{"drain", "POST", "/v1/workers/dyn-1:drain", "tok-123", "", 200, ""},
		{"unknown worker", "POST", "/v1/workers/nope:drain", "tok-123", "", 404, "NOT_FOUND"},
		{"unknown verb", "POST", "/v1/workers/dyn-1:explode", "tok-123", "", 404, "NOT_FOUND"},
		{"deregister", "DELETE", "/v1/workers/dyn-1", "tok-123", "", 200, ""},
		{"explain unknown", "GET", "/v1/decisions/nope", "", "", 404, "NOT_FOUND"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, srv, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status || errCode(out) != tc.code {
				t.Fatalf("%d %v; want %d %s", status, out, tc.status, tc.code)
			}
		})
	}
}

func TestRegistrationAndDrainShowInTheWorker(t *testing.T) {
	srv, store := newTestServer(t, true, "tok-123")
	status, out := call(t, srv, "POST", "/v1/workers", "tok-123", reg)
	if status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	w := out["worker"].(map[string]any)
	if w["source"] != "registered" || w["health"] != "healthy" || out["heartbeatInterval"] != "1s" {
		t.Fatalf("registered worker %v", out)
	}
	_, out = call(t, srv, "POST", "/v1/workers/dyn-1:drain", "tok-123", "")
	if out["draining"] != true {
		t.Fatalf("after drain: %v", out)
	}
	snap, _ := store.Snapshot(context.Background())
	for _, w := range snap.Workers {
		if w.Spec.ID == "dyn-1" && (!w.Draining || !w.Registered || time.Until(w.LeaseExpires) > 3*time.Second) {
			t.Fatalf("store: %+v", w)
		}
	}
	_, out = call(t, srv, "GET", "/v1/workers?model=m", "", "")
	if n := len(out["workers"].([]any)); n != 2 {
		t.Fatalf("%d workers", n)
	}
}

func TestNoTokenRefusesChangesAndStaticRefusesRegistration(t *testing.T) {
	srv, _ := newTestServer(t, true, "")
	if status, out := call(t, srv, "POST", "/v1/workers/cfg-0:drain", "anything", ""); status != 403 || errCode(out) != "PERMISSION_DENIED" {
		t.Fatalf("%d %v", status, out)
	}
	static, _ := newTestServer(t, false, "tok-123")
	status, out := call(t, static, "POST", "/v1/workers", "tok-123", reg)
	if status != 412 || !strings.Contains(out["error"].(map[string]any)["message"].(string), "envoy.discovery is static") {
		t.Fatalf("%d %v", status, out)
	}
}

// explainErr answers Explain with a fixed error.
type explainErr struct{ err error }

func (e explainErr) Explain(context.Context, string) (*scheduler.Decision, error) {
	return nil, e.err
}

// TestExplainNotFoundIsAKind: "not found" is the decisions.ErrNotFound
// kind, however it is worded or wrapped; any other failure is Unavailable,
// whatever its text says.
func TestExplainNotFoundIsAKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"the sentinel", decisions.ErrNotFound, codes.NotFound},
		{"wrapped, other words", fmt.Errorf("decision log of replica r2 has no %q: %w", "abc", decisions.ErrNotFound), codes.NotFound},
		{"a store failure quoting the phrase", errors.New("redis: read no decision recorded: connection refused"), codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := New(memory.New(nil, state.Limits{}), nil, explainErr{tc.err}, Options{Replica: "r"})
			_, err := svc.ExplainDecision(context.Background(), &pb.ExplainDecisionRequest{RequestId: "abc"})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("%v: code %v, want %v", err, got, tc.want)
			}
		})
	}
}
