package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

// llm-d's request headers through Envoy, the router at its defaults: a
// session's requests stay on the worker it started on though their prompts
// differ and the scores at rest prefer another, and a rewritten model is
// the one routed. Latency objectives, ours and llm-d's, are recorded in
// the decision with their sources, and a malformed one is a 400.
func TestLLMDHeaders(t *testing.T) {
	e := startWorkers(t, poolOfThree("--tokens-per-second", "200", "--ttft-ms", "0"))
	e.Cfg.SLO.Models = map[string]map[state.Priority]config.SLOTargets{
		"m": {state.PriorityStandard: {TPOT: config.Duration(60 * time.Millisecond)}},
	}
	e.Cfg.Envoy.Mode = config.ModeEndpointPicker
	e.Cfg.TLS.ExtProc = true
	e.envoyYAML = fullDuplex(t)
	e.startFront()

	chat := func(i int) string {
		return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"question %d"}],"max_tokens":4}`, i)
	}
	// Each session starts while the others' first requests are in flight,
	// so load spreads the sessions over the workers; unsessioned requests
	// at rest all go to the one worker the scores prefer.
	sessions := []string{"s-1", "s-2", "s-3"}
	home := e.holdSessions(sessions)
	if homes := map[string]bool{home["s-1"]: true, home["s-2"]: true, home["s-3"]: true}; len(homes) < 2 {
		t.Fatalf("sessions started on %v: load did not spread them, the test proves nothing", home)
	}
	e.waitIdle(10 * time.Second)
	for i := range 6 {
		for _, session := range sessions {
			status, worker, routed := e.eppServed(chat(i), "x-session-id", session)
			if status != 200 || worker != routed || worker != home[session] {
				t.Fatalf("session %s, request %d: status %d, served by %q, routed %q; the session's worker is %s", session, i, status, worker, routed, home[session])
			}
		}
	}

	status, _, _, out := e.eppServedBody(strings.Replace(eppChat, `"m"`, `"alias"`, 1), "x-llm-d-model-name-rewrite", "m")
	if status != 200 || !strings.Contains(out, `"model":"m"`) {
		t.Fatalf("rewrite to a served model: status %d: %s", status, out)
	}
	if status, _, _, out := e.eppServedBody(eppChat, "x-llm-d-model-name-rewrite", "other"); status != 404 || !strings.Contains(out, "model_not_found") {
		t.Fatalf("rewrite to a model nobody serves: status %d: %s", status, out)
	}

	// Keys are off: a header tighter than slo.min_ttft is clamped to it.
	e.checkSLO("slo-1", []string{"x-llm-d-slo-ttft-ms", "100"}, "0.5 clamped 0.06 config")
	e.checkSLO("slo-2", []string{"x-llm-d-slo-ttft-ms", "700", "x-llm-slo-ttft-ms", "900", "x-llm-d-slo-tpot-ms", "40"}, "0.9 header 0.04 header")
	status, _, _, out = e.eppServedBody(eppChat, "x-llm-slo-tpot-ms", "fast")
	if status != 400 || !strings.Contains(out, `"param":"x-llm-slo-tpot-ms"`) || !strings.Contains(out, `"code":"invalid_slo"`) {
		t.Fatalf("malformed objective: status %d: %s", status, out)
	}
}

// checkSLO sends a request with the objective headers and compares its
// decision's objectives, from the native API, with want ("ttft source
// tpot source").
func (e *env) checkSLO(id string, headers []string, want string) {
	e.t.Helper()
	if status, _, _, out := e.eppServedBody(eppChat, append(headers, "x-request-id", id)...); status != 200 {
		e.t.Fatalf("request %s: status %d: %s", id, status, out)
	}
	resp, err := http.Get("http://" + e.Cfg.AdminListen + "/v1/decisions/" + id)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	type objective struct {
		Seconds float64 `json:"seconds"`
		Source  string  `json:"source"`
	}
	var d struct {
		SLO struct{ TTFT, TPOT objective } `json:"slo"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		e.t.Fatal(err)
	}
	if got := fmt.Sprint(d.SLO.TTFT.Seconds, " ", d.SLO.TTFT.Source, " ", d.SLO.TPOT.Seconds, " ", d.SLO.TPOT.Source); got != want {
		e.t.Fatalf("decision %s: objectives %q, want %q", id, got, want)
	}
}

// holdSessions opens one streamed request per session, each held open once
// its first event is in while the next starts, and returns the worker each
// session started on.
func (e *env) holdSessions(sessions []string) map[string]string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	home := map[string]string{}
	for _, session := range sessions {
		body := `{"model":"m","messages":[{"role":"user","content":"start ` + session + `"}],"max_tokens":400,"stream":true}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			e.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-session-id", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			e.t.Fatalf("session %s: status %d", session, resp.StatusCode)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			e.t.Fatalf("session %s: %v", session, err)
		}
		home[session] = resp.Header.Get("x-routed-node")
	}
	return home
}
