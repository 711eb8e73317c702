package test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/llm-router/llm-router/"

// layers are the README's dependency rule, "cmd -> internal/app -> extproc
// -> scheduler -> state, scoring", one entry per arrow, plus the line
// between the product and its harnesses. Each names the packages it covers
// (go list patterns, tests left out) and the folders of this module they
// must not reach, directly or through another package. The depguard rules
// in .golangci.yml say the same for `make lint`, import by import.
var layers = []struct {
	name   string
	pkgs   []string
	forbid []string
}{
	// scoring's root is the standard library and its latency model only
	// (depguard); its subpackages, the emulations and the block hashes,
	// stay below state.
	{"scoring is below state", []string{"./scoring/..."}, []string{"state", "scheduler", "extproc", "internal", "envoy", "cmd", "test", "benchmark"}},
	{"state is below the scheduler", []string{"./state/..."}, []string{"scheduler", "extproc", "internal", "envoy", "cmd", "test", "benchmark"}},
	{"the scheduler is below extproc", []string{"./scheduler/..."}, []string{"extproc", "internal", "envoy", "cmd", "test", "benchmark"}},
	// Config loading, metrics and API keys reach extproc and the scheduler
	// only through interfaces they declare, wired in internal/app.
	{"extproc is below internal/app", []string{"./extproc/..."}, []string{"internal", "envoy", "cmd", "test", "benchmark"}},
	{"the product imports no harness", []string{"./cmd/llm-router", "./internal/...", "./envoy/...", "./proto/..."}, []string{"test", "benchmark"}},
}

// reaches lists, for each package that pkgs match, the packages of this
// module among its dependencies (transitive; its tests left out).
func reaches(t *testing.T, pkgs []string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	got := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		got[fields[0]] = nil
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				got[fields[0]] = append(got[fields[0]], d)
			}
		}
	}
	return got
}

func within(pkg, folder string) bool {
	return pkg == module+folder || strings.HasPrefix(pkg, module+folder+"/")
}

// TestDependenciesPointOneWay fails when a package reaches a layer above
// it, or the product reaches a harness, through any chain of imports.
func TestDependenciesPointOneWay(t *testing.T) {
	for _, l := range layers {
		got := reaches(t, l.pkgs)
		if len(got) == 0 {
			t.Errorf("%s: %v lists no package", l.name, l.pkgs)
		}
		for pkg, deps := range got {
			for _, d := range deps {
				for _, f := range l.forbid {
					if within(d, f) {
						t.Errorf("%s: %s imports %s (directly or not), and may not reach %s/", l.name, pkg, d, f)
					}
				}
			}
		}
	}
}

// TestDependencyListingSeesTheLayers: the same listing does show the
// arrows that are allowed, so the test above cannot pass by reading
// nothing.
func TestDependencyListingSeesTheLayers(t *testing.T) {
	app := reaches(t, []string{"./internal/app"})[module+"internal/app"]
	for _, want := range []string{"extproc", "scheduler", "state", "scoring", "internal/config"} {
		seen := false
		for _, d := range app {
			seen = seen || d == module+want
		}
		if !seen {
			t.Errorf("internal/app does not list %s among its dependencies: the check reads the wrong thing", want)
		}
	}
}

// TestSpansUseTheOpenTelemetryAPIOnly: the packages that make spans
// (extproc, the scheduler) and those below them reach neither the
// OpenTelemetry SDK nor an exporter, which internal/tracing sets up; the
// same listing shows internal/tracing reaching both, so the check reads
// the right thing.
func TestSpansUseTheOpenTelemetryAPIOnly(t *testing.T) {
	sdkOrExporter := func(d string) bool {
		return strings.HasPrefix(d, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(d, "go.opentelemetry.io/otel/exporters")
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./extproc/...", "./scheduler/...", "./state/...", "./scoring/...", "./internal/tracing")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	tracingSeesSDK := false
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, d := range fields[1:] {
			switch {
			case fields[0] == module+"internal/tracing":
				tracingSeesSDK = tracingSeesSDK || sdkOrExporter(d)
			case sdkOrExporter(d):
				t.Errorf("%s reaches %s: make spans through the API (go.opentelemetry.io/otel/trace)", fields[0], d)
			}
		}
	}
	if !tracingSeesSDK {
		t.Error("internal/tracing lists neither the SDK nor an exporter: the check reads the wrong thing")
	}
}
