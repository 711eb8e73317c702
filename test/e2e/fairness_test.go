package e2e

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// TestFairQueueAcrossReplicas: one worker of cap 1, two router replicas
// on one Redis, each behind its own Envoy. Tenant heavy queues six
// requests through replica A, then tenant light three through replica B.
// First come, first served would run all of heavy's first; the fair queue
// alternates the two tenants whichever replica holds the request, so
// light's three run before heavy's fourth. The metrics count each
// tenant's service, and a malformed fairness id is a 400 naming the
// header.
func TestFairQueueAcrossReplicas(t *testing.T) {
	a, b, ca, cb := oneSlotTwoReplicas(t, "fair", 16)
	epoch := time.Now()
	busy := occupy(t, a, ca, 20, epoch) // 1 s
	type done struct {
		tenant string
		r      loadgen.Result
	}
	results := make(chan done, 9)
	send := func(c *loadgen.Client, e *env, tenant string, queued int) {
		req := streamReq(6, "") // 0.3 s each
		req.FairnessID = tenant
		go func() { results <- done{tenant, c.Do(e.ctx, req, epoch)} }()
		e.waitQueued(queued)
	}
	for i := range 6 {
		send(ca, a, "heavy", i+1)
	}
	for i := range 3 {
		send(cb, b, "light", i+1)
	}
	var all []done
	for range 9 {
		d := <-results
		if !d.r.OK() || d.r.Tokens != 6 {
			t.Fatalf("%s's request failed: %+v", d.tenant, d.r)
		}
		all = append(all, d)
	}
	if r := <-busy; !r.OK() {
		t.Fatalf("busy request failed: %+v", r)
	}
	slices.SortFunc(all, func(x, y done) int { return int((x.r.Start + x.r.TTFT) - (y.r.Start + y.r.TTFT)) })
	order := make([]string, len(all))
	for i, d := range all {
		order[i] = d.tenant
	}
	t.Logf("served in order %v", order)
	if want := []string{"heavy", "light", "heavy", "light", "heavy", "light", "heavy", "heavy", "heavy"}; !slices.Equal(order, want) {
		t.Fatalf("served in order %v, want %v (FCFS would serve heavy's six first)", order, want)
	}

	// Each replica counts the requests it held.
	for _, c := range []struct {
		e      *env
		tenant string
	}{{a, "heavy"}, {b, "light"}} {
		if v := scrape(t, c.e, `llm_router_fair_service_tokens_total\{tenant="`+c.tenant+`"\} (\S+)`); v == "" || v == "0" {
			t.Fatalf("replica %s reports no service for %s", c.e.Cfg.ReplicaID, c.tenant)
		}
	}
	resp, body := b.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2}`,
		map[string]string{"x-llm-d-inference-fairness-id": "not/a/tenant"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_fairness_id"`) || !strings.Contains(body, "x-llm-d-inference-fairness-id") {
		t.Fatalf("malformed fairness id: %d %s", resp.StatusCode, body)
	}
	a.waitIdle(5 * time.Second)
	b.waitIdle(5 * time.Second)
}

// scrape reads the first submatch of pattern in the replica's metrics
// ("" when absent).
func scrape(t *testing.T, e *env, pattern string) string {
	t.Helper()
	resp, err := http.Get("http://" + e.Cfg.AdminListen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(pattern).FindSubmatch(raw)
	if m == nil {
		return ""
	}
	return string(m[1])
}
