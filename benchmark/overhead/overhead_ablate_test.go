package overhead

import (
	"strings"
	"testing"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
)

// TestAblationsEditTheRenderedConfig: each ablation takes out exactly its
// part of the real rendering and leaves the other filters in place.
func TestAblationsEditTheRenderedConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Workers = []config.Worker{{ID: "gpu-0", Address: "127.0.0.1:8001", Models: []string{"m"}, MaxConcurrency: 4}}
	y, err := envoy.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	filters := []string{"envoy.filters.http.json_to_metadata", "envoy.filters.http.ext_proc", "llm_router.fail_open", "envoy.filters.http.router"}
	for _, f := range filters {
		if !strings.Contains(string(y), "- name: "+f+"\n") {
			t.Fatalf("rendering lacks %s", f)
		}
	}
	gone := map[string]string{ablations[0].name: filters[0], ablations[1].name: filters[2]}
	for _, a := range ablations {
		out, err := a.edit(string(y))
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		for _, f := range filters {
			has := strings.Contains(out, "- name: "+f+"\n")
			if has == (gone[a.name] == f) {
				t.Errorf("%s: filter %s present %v", a.name, f, has)
			}
		}
		if gone[a.name] == filters[2] && (strings.Contains(out, "envoy_on_request") || !strings.Contains(out, "JsonToMetadata")) {
			t.Errorf("%s: the Lua body stayed or the filter before it went", a.name)
		}
		if gone[a.name] == "" && !strings.Contains(out, "response_header_mode: SKIP") {
			t.Errorf("%s: response headers still sent", a.name)
		}
	}
	if _, err := removeFilter(string(y), "envoy.filters.http.nope"); err == nil {
		t.Error("removing an absent filter succeeded")
	}
}
