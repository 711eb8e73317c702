package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/cli"
)

// `llm-router smoke` (make smoke) passes against a healthy stack and fails
// when the router is down and Envoy serves fail-open.
func TestSmoke(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "500", "--ttft-ms", "0"), nil)
	raw, err := exec.Command(bins["llm-router"], "smoke", "--url", e.URL, "--model", "model-b", "--admin", "http://"+e.Cfg.AdminListen).CombinedOutput()
	out := string(raw)
	if err != nil || strings.Contains(out, "FAIL") || !strings.Contains(out, "all 8 checks passed") || !strings.Contains(out, "served by b-0") {
		t.Fatalf("smoke against a healthy stack:\n%s", out)
	}
	t.Logf("\n%s", out)

	e.shutdownRouter()
	var b strings.Builder
	err = cli.Smoke(context.Background(), cli.SmokeOptions{URL: e.URL, Model: "model-a"}, &b)
	if err == nil || !strings.Contains(b.String(), "served fail-open") {
		t.Fatalf("smoke with the router down passed: %v\n%s", err, b.String())
	}
}
