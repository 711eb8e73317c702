// Package record writes a benchmark run's files: a dated run folder under
// the results folder, and the stable copies in its latest/ that the docs
// embed.
package record

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Folder creates <results>/<UTC time>-<kind> for a run's files.
func Folder(results, kind string, at time.Time) (string, error) {
	dir := filepath.Join(results, at.UTC().Format("20060102-150405")+"-"+kind)
	return dir, os.MkdirAll(dir, 0o750)
}

// Publish copies the named files of dir into <results>/latest, the
// stable copy docs/benchmark-results.md embeds, replacing older copies of the same files.
func Publish(results, dir string, files []string) error {
	latest := filepath.Join(results, "latest")
	if err := os.MkdirAll(latest, 0o750); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(latest, f), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes what fill writes to path, once fill has succeeded.
func WriteFile(path string, fill func(io.Writer) error) error {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// WriteJSON writes v to path as indented JSON, making its folder.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}
