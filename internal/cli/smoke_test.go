package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/admin/admintest"
)

// fakeStack answers as Envoy in front of the router does, on the OpenAI
// surface (no Go type of ours describes it: the bodies are written out).
// The zero value is a healthy stack; each field breaks one thing.
type fakeStack struct {
	failOpen      bool // served, but Envoy's fail-open route marked it
	noNode        bool // no x-routed-node: the router was bypassed
	noDone        bool // streams end without data: [DONE]
	badJSONStatus int  // what malformed JSON gets instead of 400
	obeysCluster  bool // a client's x-llm-cluster header picks the upstream
	requestID     string
}

func (f fakeStack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"model-a","object":"model"},{"id":"model-b","object":"model"}]}`))
		return
	}
	oaiError := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","code":%q}}`, msg, code)
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	switch {
	case json.NewDecoder(r.Body).Decode(&req) != nil:
		oaiError(max(f.badJSONStatus, 400), "invalid_request", "request body is not valid JSON")
		return
	case req.Model != "model-a" && req.Model != "model-b":
		oaiError(404, "model_not_found", "the model "+req.Model+" does not exist")
		return
	case f.obeysCluster && r.Header.Get("x-llm-cluster") != "":
		http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
		return
	}
	if !f.noNode {
		w.Header().Set("x-routed-node", "a-0")
	}
	if f.failOpen {
		w.Header().Set("x-llm-fail-open", "true")
	}
	w.Header().Set("x-request-id", f.requestID)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, tok := range []string{"h", "i"} {
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", tok)
	}
	if !f.noDone {
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}
}

var smokeLine = regexp.MustCompile(`^(ok|FAIL)  (.*) \(\d+(\.\d+)?[µmn]?s\)$`)

// smokeChecks are the checks' names, as Smoke prints them.
var smokeChecks = []string{
	"GET /v1/models lists the model",
	"a completion is served by a worker the router chose",
	"a stream runs to data: [DONE]",
	"malformed JSON gets 400 invalid_request_error",
	"an unknown model gets 404 model_not_found",
	"a client's x-llm-cluster header is ignored",
	"the router's /health is ok",
	"the router explains the completion",
}

// splitCheck splits a line's text into the check's name and what it saw.
func splitCheck(text string) (name, saw string) {
	for _, c := range smokeChecks {
		if rest, ok := strings.CutPrefix(text, c); ok {
			return c, strings.TrimSpace(rest)
		}
	}
	return "", text
}

// TestSmoke: against a healthy stack every check passes and says what it
// saw; each broken part fails its own check only, and the run fails.
func TestSmoke(t *testing.T) {
	fleet := admintest.TypicalFleet()
	adminURL := admintest.Serve(t, fleet, "").URL
	tests := []struct {
		name  string
		stack fakeStack
		model string
		admin bool
		// failed maps the check that fails to a part of its message;
		// nil: all pass.
		failed map[string]string
	}{
		{name: "healthy", stack: fakeStack{}},
		{name: "healthy, with the admin checks", stack: fakeStack{}, admin: true},
		{name: "a chosen model", stack: fakeStack{}, model: "model-b"},
		{name: "a model not served", stack: fakeStack{}, model: "model-z", failed: map[string]string{
			"GET /v1/models lists the model":                      `model "model-z" not among model-a, model-b`,
			"a completion is served by a worker the router chose": "HTTP 404",
			"a stream runs to data: [DONE]":                       "HTTP 404",
			"a client's x-llm-cluster header is ignored":          "HTTP 404",
		}},
		{name: "fail-open", stack: fakeStack{failOpen: true}, failed: map[string]string{
			"a completion is served by a worker the router chose": "served fail-open",
			"a stream runs to data: [DONE]":                       "served fail-open",
			"a client's x-llm-cluster header is ignored":          "served fail-open",
		}},
		{name: "the router bypassed", stack: fakeStack{noNode: true}, failed: map[string]string{
			"a completion is served by a worker the router chose": "no x-routed-node header",
			"a stream runs to data: [DONE]":                       "no x-routed-node header",
			"a client's x-llm-cluster header is ignored":          "no x-routed-node header",
		}},
		{name: "a stream without [DONE]", stack: fakeStack{noDone: true}, failed: map[string]string{
			"a stream runs to data: [DONE]": "stream ended after 2 events without data: [DONE]",
		}},
		{name: "malformed JSON not refused as such", stack: fakeStack{badJSONStatus: 500}, failed: map[string]string{
			"malformed JSON gets 400 invalid_request_error": "HTTP 500, want 400",
		}},
		{name: "the client's cluster obeyed", stack: fakeStack{obeysCluster: true}, failed: map[string]string{
			"a client's x-llm-cluster header is ignored": "HTTP 503 (the client's header may have been obeyed)",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.stack.requestID = admintest.RequestID
			srv := httptest.NewServer(tc.stack)
			defer srv.Close()
			o := SmokeOptions{URL: srv.URL + "/", Model: tc.model}
			checks := 6
			if tc.admin {
				o.Admin, checks = adminURL, 8
			}
			var out strings.Builder
			err := Smoke(context.Background(), o, &out)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			last := ""
			if err == nil { // a summary line after the checks
				last, lines = lines[len(lines)-1], lines[:len(lines)-1]
			}
			failed := 0
			for _, l := range lines {
				m := smokeLine.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("not a check's line: %q\n%s", l, out.String())
				}
				check, saw := splitCheck(strings.TrimSpace(m[2]))
				want, wantFail := tc.failed[check]
				switch {
				case check == "":
					t.Fatalf("no known check in %q", l)
				case wantFail && m[1] != "FAIL":
					t.Errorf("%s passed, want it failed with %q", check, want)
				case wantFail && !strings.Contains(saw, want):
					t.Errorf("%s failed with %q, want %q", check, saw, want)
				case !wantFail && m[1] != "ok":
					t.Errorf("%s failed: %s", check, saw)
				}
				if m[1] == "FAIL" {
					failed++
				}
			}
			if len(lines) != checks {
				t.Fatalf("%d checks run, want %d:\n%s", len(lines), checks, out.String())
			}
			if failed == 0 {
				if err != nil || last != fmt.Sprintf("smoke: all %d checks passed against %s", checks, srv.URL) {
					t.Fatalf("error %v, last line %q", err, last)
				}
			} else if err == nil || err.Error() != fmt.Sprintf("smoke: %d of %d checks failed against %s", failed, checks, srv.URL) {
				t.Fatalf("error %v after %d failed checks", err, failed)
			}
			if tc.admin && !strings.Contains(out.String(), "claimed -> a-0 with scored") {
				t.Errorf("the explain check does not name the decision:\n%s", out.String())
			}
		})
	}
}
