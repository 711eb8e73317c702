package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/test/stack"
)

// TestExplainAcrossReplicas: a request decided by replica A is explained by
// `llm-router explain` pointed at replica B; both share Redis.
func TestExplainAcrossReplicas(t *testing.T) {
	rd := startRedis(t)
	f := newRouterFleet(t, 2, fakeWorkers(3, 4, "m"), rd.Addr, nil)
	id := fmt.Sprintf("explain-me-%d", time.Now().UnixNano())
	r, err := f.conns[0].start(context.Background(), "x-request-id", id, "x-llm-slo-ttft-ms", "900")
	if err != nil {
		t.Fatal(err)
	}
	worker, status, err := r.decide(chatBody("m"))
	if err != nil || status != 200 {
		t.Fatalf("decide: %v %d", err, status)
	}
	if err := r.streamResponse(4, time.Millisecond); err != nil {
		t.Fatal(err)
	}

	adminB := "http://" + f.cfgs[1].AdminListen
	var out []byte
	err = stack.WaitFor(context.Background(), 5*time.Second, func() error {
		out, err = exec.Command(bins["llm-router"], "explain", id, "--admin", adminB, "-o", "json").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		var d scheduler.Decision
		if err := json.Unmarshal(out, &d); err != nil {
			return err
		}
		if d.Result == nil {
			return fmt.Errorf("the outcome is not recorded yet")
		}
		wantSLO := scheduler.SLO{TTFT: scheduler.NewObjective(900*time.Millisecond, scheduler.SLOHeader), TPOT: scheduler.NewObjective(100*time.Millisecond, scheduler.SLODefault)}
		if d.RequestID != id || d.Worker != worker || d.Replica != "replica-0" || d.Result.ServedBy != worker || len(d.Candidates) != 3 || d.SLO != wantSLO {
			return fmt.Errorf("decision %+v", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	table, err := exec.Command(bins["llm-router"], "explain", "--admin", adminB, id).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, table)
	}
	t.Logf("llm-router explain %s --admin <replica B>:\n%s", id, table)
	for _, want := range []string{id, "-> " + worker, "* ", "replica-0", "norm_latency", "slo       ttft 900ms (from the request's header), tpot 100ms (the default)"} {
		if !strings.Contains(string(table), want) {
			t.Fatalf("explain output lacks %q", want)
		}
	}
	// Errors say what went wrong.
	if out, err := exec.Command(bins["llm-router"], "explain", "no-such-request", "--admin", adminB).CombinedOutput(); err == nil || !strings.Contains(string(out), "no decision recorded") {
		t.Fatalf("unknown id: %v %s", err, out)
	}
	dead, _ := stack.FreeAddr()
	if out, err := exec.Command(bins["llm-router"], "explain", id, "--admin", dead).CombinedOutput(); err == nil || !strings.Contains(string(out), "connection refused") {
		t.Fatalf("no router: %v %s", err, out)
	}
}
