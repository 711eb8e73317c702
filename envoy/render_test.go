package envoy

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/config"
)

var update = flag.Bool("update", false, "rewrite envoy.yaml from router.yaml")

// TestCheckedInExampleIsRendered keeps envoy/envoy.yaml equal to what
// `llm-router envoy-config --config envoy/router.yaml` prints.
func TestCheckedInExampleIsRendered(t *testing.T) {
	cfg, err := config.Load("router.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("envoy.yaml", got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("envoy/envoy.yaml is stale: run `go test ./envoy -update` (or `llm-router envoy-config --config envoy/router.yaml > envoy/envoy.yaml`)")
	}
}

func TestRenderNamesAndFailoverPools(t *testing.T) {
	cfg := config.Default()
	cfg.Workers = []config.Worker{
		{ID: "a", Address: "10.0.0.1:8000", Models: []string{"m1", "org/m2"}, MaxConcurrency: 1},
		{ID: "b", Address: "gpu-b.internal:8000", Models: []string{"m1"}, MaxConcurrency: 1},
	}
	out, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := string(out)
	for _, want := range []string{
		"- name: a\n    type: STATIC",
		"- name: b\n    type: STRICT_DNS",
		"- name: pool.m1.except.a",
		"clusters: [a, pool.m1.except.a]",
		"clusters: [b, pool.m1.except.b]",
		"- name: a.via.org_m2",
		"clusters: [a]\n", // a is org/m2's only worker: nowhere to fail over
		"port_value: 9002",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	if ClusterFor("a", "org/m2") != "a.via.org_m2" {
		t.Fatalf("ClusterFor = %q", ClusterFor("a", "org/m2"))
	}
}

func TestSlugCollisionIsAnError(t *testing.T) {
	cfg := config.Default()
	cfg.Workers = []config.Worker{
		{ID: "a", Address: "10.0.0.1:8000", Models: []string{"org/m"}, MaxConcurrency: 1},
		{ID: "b", Address: "10.0.0.2:8000", Models: []string{"org_m"}, MaxConcurrency: 1},
	}
	if _, err := Render(cfg); err == nil || !strings.Contains(err.Error(), "same Envoy cluster name") {
		t.Fatalf("want a collision error, got %v", err)
	}
}

// TestSlug: the fast path for safe names agrees with the regexp on every
// kind of name, and only unsafe runs are replaced, one "_" a run.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"llama-3-8b":              "llama-3-8b",
		"Qwen2.5_7B":              "Qwen2.5_7B",
		"meta-llama/Llama-3.1-8B": "meta-llama_Llama-3.1-8B",
		"a b  c":                  "a_b_c",
		"modèle":                  "mod_le",
		"":                        "",
		"x:y@z":                   "x_y_z",
	} {
		if got := Slug(in); got != want || got != slugRe.ReplaceAllString(in, "_") {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
