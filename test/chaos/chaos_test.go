package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/llm-router/llm-router/test/stack"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llmr-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := stack.Build(dir, "llm-router", "gpusim"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestShortSubset is the chaos subset `make test` runs: a router replica
// killed under load, a rolling restart of the replicas, every replica
// killed, and the Sentinel master killed. `make chaos` runs all scenarios.
func TestShortSubset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Envoy, Redis, router replicas and workers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := Run(ctx, RunOptions{Options: Options{BinDir: binDir}, Steady: 2 * time.Second, Logf: t.Logf},
		"kill-one-router", "restart-routers", "kill-all-routers", "redis-failover")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results, want 4", len(results))
	}
	t.Log("\n" + Markdown("go test ./chaos", results))
	for _, r := range results {
		if r.Sent < 100 {
			t.Errorf("%s: only %d requests sent", r.Scenario, r.Sent)
		}
		if !r.Pass {
			t.Errorf("%s failed: %+v", r.Scenario, r.Checks)
		}
	}
}

func TestUnknownScenario(t *testing.T) {
	if _, err := Run(context.Background(), RunOptions{}, "kill-everything"); err == nil {
		t.Fatal("an unknown scenario ran")
	}
}

// The judges fail what they must: a fail-open answer from a worker of the
// wrong model, a failure after Envoy noticed, a silent cut stream.
func TestJudgesCatchFaults(t *testing.T) {
	t0 := time.Now()
	tl := &timeline{fault: t0, detected: t0.Add(time.Second), recovered: t0.Add(2 * time.Second), seen: map[string]bool{}}
	failed := func(r Result, name string) bool {
		for _, c := range r.Checks {
			if c.Name == name {
				return !c.Pass
			}
		}
		t.Fatalf("no check %q in %+v", name, r.Checks)
		return false
	}
	out := []outcome{{start: t0.Add(500 * time.Millisecond), model: "model-a", status: 200, failOpen: true, served: "b-0", node: "b-0"}}
	var r Result
	judgeKillAll(&r, out, tl)
	if !failed(r, "fail-open keeps routing by model") {
		t.Error("a model-a request served by b-0 passed")
	}
	r = Result{Sent: 1, Failed: 1}
	judgeKillOne(&r, []outcome{{start: t0.Add(1500 * time.Millisecond), status: 503}}, tl)
	if !failed(r, "no failure after Envoy noticed") {
		t.Error("a failure after detection passed")
	}
	r = Result{Cut: 1}
	judgeKillWorker(&r, []outcome{{stream: true, status: 200, cut: true}}, tl)
	if !failed(r, "cut streams end with an error") {
		t.Error("a silently cut stream passed")
	}
	r = Result{}
	judgeKillWorker(&r, []outcome{{stream: false, status: 502}}, tl)
	if !failed(r, "zero failed non-streaming requests") {
		t.Error("a failed non-streaming request passed")
	}
}
