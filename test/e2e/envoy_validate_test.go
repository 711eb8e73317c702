package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/test/stack"
)

// TestEveryEnvoyYAMLValidates runs `envoy --mode validate` on every Envoy
// configuration checked into the repository.
func TestEveryEnvoyYAMLValidates(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Envoy bootstraps only (Kubernetes manifests embed one in a
		// ConfigMap; those are checked by their own test).
		if strings.Contains(string(b), "static_resources:") && !strings.Contains(string(b), "apiVersion:") {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no Envoy YAML found; the walk is broken")
	}
	for _, p := range found {
		rel, _ := filepath.Rel(root, p)
		t.Run(rel, func(t *testing.T) {
			if err := stack.ValidateEnvoy(envoyBin, p); err != nil {
				t.Fatal(err)
			}
		})
	}
}
