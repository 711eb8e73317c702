package test

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnly are the modules only tests and the benchmark use. They stay in
// the one go.mod (see docs/dependencies.md); the product binary must not
// link them.
//
// k8s.io (client-go, api, apimachinery) is not among them since the router
// discovers workers from Kubernetes (internal/discovery), but its fake
// clientsets, which the discovery and deploy tests use, are.
var testOnly = []string{
	"k8s.io/client-go/kubernetes/fake",
	"k8s.io/client-go/dynamic/fake",
	"github.com/prometheus/prometheus/",
	"gonum.org/",
	"github.com/openai/openai-go",
	// Not a module but the benchmark's emulations of other schedulers:
	// linked, they register strategies the product does not offer.
	"github.com/llm-router/llm-router/scoring/emulate",
}

func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	return strings.Fields(string(out))
}

func linked(list []string, prefix string) []string {
	var out []string
	for _, p := range list {
		if strings.HasPrefix(p, prefix) || p == strings.TrimSuffix(prefix, "/") {
			out = append(out, p)
		}
	}
	return out
}

// TestProductBinaryLinksNoTestOnlyModule: what users run, llm-router,
// carries none of the test and benchmark dependencies.
func TestProductBinaryLinksNoTestOnlyModule(t *testing.T) {
	product := deps(t, "./cmd/llm-router")
	if len(linked(product, "github.com/llm-router/llm-router/extproc")) == 0 {
		t.Fatal("go list -deps ./cmd/llm-router does not list extproc: the check reads the wrong thing")
	}
	for _, prefix := range testOnly {
		if got := linked(product, prefix); len(got) > 0 {
			t.Errorf("llm-router links %s, a test/benchmark-only dependency: %v", prefix, got)
		}
	}
}

// TestTestOnlyModulesAreSeen: the same check finds each test-only module
// where it is used, so the test above cannot pass by looking wrong.
func TestTestOnlyModulesAreSeen(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "./deploy/...", "./benchmark/...", "./test/e2e/...", "./internal/discovery/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := strings.Fields(string(out))
	for _, prefix := range testOnly {
		if len(linked(all, prefix)) == 0 {
			t.Errorf("no package of deploy, benchmark, e2e or discovery tests uses %s: drop it from the list (and go.mod)", prefix)
		}
	}
}
