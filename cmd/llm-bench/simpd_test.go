package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/benchmark/sim"
)

// A short P/D study through the command line: 3 GPUs aggregated and 1+2
// at two thresholds, 20 summarization requests, two seeds.
func TestSimPDCommandSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pd.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"sim", "pd", "--gpus", "a100-llama3-8b:3", "--splits", "0,1", "--thresholds", "0,20000",
		"--requests", "20", "--qps", "1", "--seeds", "1,2", "--json", out, "--quiet",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		sim.PDReport
		Aims []sim.PDAim `json:"aims"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Summaries) != 3 || len(rep.Aims) != 6 {
		t.Fatalf("%d summaries and %d aims, want 3 and 6", len(rep.Summaries), len(rep.Aims))
	}
	for _, m := range rep.Summaries {
		if m.Requests != 40 || m.TTFT[0].Value <= 0 || m.ITL[2].Value <= 0 {
			t.Errorf("%s: %d requests, TTFT p50 %v, ITL p99 %v", m.Label(), m.Requests, m.TTFT[0].Value, m.ITL[2].Value)
		}
		if !strings.Contains(stdout.String(), "| "+m.Label()+" | 1 |") {
			t.Errorf("no row for %s in the Markdown:\n%s", m.Label(), stdout.String())
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("--quiet printed progress: %s", stderr.String())
	}
}

func TestSimPDCommandRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "pd", "--gpus", "a100-llama3-8b:3", "--splits", "3"},
		{"sim", "pd", "--splits", "x"},
		{"sim", "pd", "--link-gbps", "0", "--splits", "2"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
