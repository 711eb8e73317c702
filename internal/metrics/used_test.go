package metrics_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/metrics"
)

// TestEveryMetricIsRecorded: every collector of Metrics is written by the
// product somewhere outside tests; a metric that
// is declared and never recorded is a lie on a dashboard.
func TestEveryMetricIsRecorded(t *testing.T) {
	used := map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".venv", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				used[sel.Sel.Name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[metrics.Metrics]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Registry" || f.Name == "Types" {
			continue
		}
		if !used[f.Name] {
			t.Errorf("Metrics.%s is declared but never recorded outside tests: record it or drop it", f.Name)
		}
	}
}
