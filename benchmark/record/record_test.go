package record

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFolderWriteAndPublish(t *testing.T) {
	results := t.TempDir()
	dir, err := Folder(results, "compare-x", time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "20260102-020405-compare-x" {
		t.Errorf("run folder %s, want its UTC time and kind", dir)
	}
	if err := WriteJSON(filepath.Join(dir, "a.json"), map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "b.md"), func(w io.Writer) error { _, err := io.WriteString(w, "# b\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := Publish(results, dir, []string{"a.json", "b.md"}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(results, "latest", "a.json"))
	b, _ := os.ReadFile(filepath.Join(results, "latest", "b.md"))
	if !strings.Contains(string(a), `"n": 1`) || string(b) != "# b\n" {
		t.Errorf("latest/: a.json %q, b.md %q", a, b)
	}
	if err := Publish(results, dir, []string{"missing"}); err == nil {
		t.Error("publishing a file the run did not write succeeded")
	}
}
