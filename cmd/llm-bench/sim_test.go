package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/benchmark/sim"
)

// A short study through the command line: 300 shared-prefix requests on 8
// GPUs, two strategies (one an emulation), one and two replicas, two
// seeds; the Markdown table and the JSON report agree and cover every
// configuration.
func TestSimCommandSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sim.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"sim", "--gpus", "a100-llama3-8b:6,h100-llama2-7b:2", "--replicas", "1,2",
		"--strategies", "scored,prefix_match_or_shortest_queue", "--qps", "12", "--seeds", "1,2",
		"--num-groups", "50", "--num-prompts-per-group", "6", "--system-prompt-len", "1500",
		"--question-len", "300", "--output-len", "30", "--json", out, "--quiet",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Summaries) != 4 {
		t.Fatalf("%d summaries, want 2 strategies × 2 replica counts", len(rep.Summaries))
	}
	for _, m := range rep.Summaries {
		if m.Requests != 600 || m.Refused != 0 || m.TTFT[0].Value <= 0 || m.OutputTokens.Median <= 0 || m.Events == 0 {
			t.Errorf("%s × %d: %d requests, %d refused, TTFT p50 %v ms, %v tok/s, %d events",
				m.Strategy, m.Replicas, m.Requests, m.Refused, m.TTFT[0].Value, m.OutputTokens.Median, m.Events)
		}
		row := "| " + m.Strategy + " | " + string(rune('0'+m.Replicas)) + " | 12 |"
		if !strings.Contains(stdout.String(), row) {
			t.Errorf("no row %q in the Markdown:\n%s", row, stdout.String())
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("--quiet printed progress: %s", stderr.String())
	}
}

func TestSimCommandRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args  []string
		field string
	}{
		{[]string{"--gpus", "a100-llama3-8b:2", "--replicas", "3"}, "replicas"},
		{[]string{"--ladder", "8:2:4"}, "ladder.min"},
		{[]string{"--ladder", "8-2"}, "--ladder"},
		{[]string{"--gpus", "a100-llama3-8b"}, "--gpus"},
		{[]string{"--workload", "trace"}, "workload.trace"},
		{[]string{"--workload", "lora", "--max-loras", "0"}, "engine.max_loras"},
		{[]string{"--workload", "lora", "--lora-zipf-s", "-1"}, "workload.lora.zipf_s"},
		{[]string{"--workload", "lora", "--lora-shift-by", "60", "--lora-shift-every", "1s"}, "workload.lora.shift_by"},
		{[]string{"--workload", "lora", "--lora-preset", "weekly"}, "--lora-preset"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"sim"}, c.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%v: got %v, want an error naming %s", c.args, err, c.field)
		}
		if stdout.Len() > 0 || strings.Contains(stderr.String(), "sim:") {
			t.Errorf("%v: ran anyway:\n%s%s", c.args, stdout.String(), stderr.String())
		}
	}
}

func TestSimLoRAPresets(t *testing.T) {
	s, _, err := parseSimFlags([]string{"--workload", "lora", "--lora-preset", "shifting"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := sim.LoRAShiftingPreset(); s.Workload.LoRA != want || s.Engine.MaxLoras != 4 {
		t.Errorf("shifting preset: %+v max_loras %d, want %+v and 4", s.Workload.LoRA, s.Engine.MaxLoras, want)
	}
	s, _, err = parseSimFlags([]string{"--workload", "lora", "--lora-preset", "shifting", "--lora-shift-by", "3"}, io.Discard)
	if err != nil || s.Workload.LoRA.ShiftBy != 3 || s.Workload.LoRA.ShiftEvery == 0 {
		t.Errorf("an explicit shift was not kept over the preset: %+v (%v)", s.Workload.LoRA, err)
	}
	s, _, err = parseSimFlags(nil, io.Discard)
	if err != nil || s.Engine.MaxLoras != 0 || s.Workload.LoRA != (sim.LoRAWorkload{}) {
		t.Errorf("a shared_prefix study carries LoRA settings: %+v max_loras %d (%v)", s.Workload.LoRA, s.Engine.MaxLoras, err)
	}
}
