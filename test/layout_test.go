package test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutTableListsEveryTopLevelFolder keeps the README's layout table
// and the repository's top level in step: every folder (dotfolders and
// build output aside) has a line, every line names a folder, and there are
// at most 12 of them, so the top level stays readable.
func TestLayoutTableListsEveryTopLevelFolder(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "### Layout")
	if start < 0 {
		t.Fatal("README has no ### Layout section")
	}
	section := text[start:]
	if end := strings.Index(section[len("### Layout"):], "\n#"); end >= 0 {
		section = section[:end+len("### Layout")]
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_-]+)/` \\|").FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
	}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{"bin": true} // build output, git-ignored
	folders := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || ignored[e.Name()] {
			continue
		}
		folders[e.Name()] = true
		if !listed[e.Name()] {
			t.Errorf("top-level folder %s/ has no line in the README's layout table", e.Name())
		}
	}
	for name := range listed {
		if !folders[name] {
			t.Errorf("the README's layout table lists %s/, which does not exist", name)
		}
	}
	if len(folders) > 12 {
		t.Errorf("%d top-level folders; the layout keeps at most 12", len(folders))
	}
}
