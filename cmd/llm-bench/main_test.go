package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/benchmark/compare"
)

func TestRunDispatch(t *testing.T) {
	if err := run(context.Background(), nil, io.Discard, io.Discard); err == nil {
		t.Error("no command accepted")
	}
	if err := run(context.Background(), []string{"nope"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("unknown command: %v", err)
	}
}

func TestCompareFlags(t *testing.T) {
	o, err := parseCompareFlags([]string{"--short"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Loads) != 3 || o.Loads[0] != 0.6 || o.Loads[2] != 0.95 || o.Requests != 500 || o.ProbeRequests != 800 || o.MaxProbes != 4 || len(o.Seeds) != 3 || o.CapsForThroughput || o.CapsAtMean {
		t.Errorf("short: %+v", o)
	}
	if from, to := o.Requests-int(float64(o.Requests)*o.Tail+0.5), int(float64(o.Requests)*o.Warmup+0.5); from-to < 400 {
		t.Errorf("short measures %d requests a seed, want at least 400", from-to)
	}
	if o.Name != "azure-conv" || len(o.Setups) != len(compare.ShortSetups()) || o.CapacitySetup.Name != "envoy LEAST_REQUEST" || o.Aims != compare.AimsConversation {
		t.Errorf("name %q, setups %v, capacity setup %v", o.Name, o.Setups, o.CapacitySetup)
	}
	o, err = parseCompareFlags([]string{"--short", "--name", "mooncake-conv", "--requests", "50", "--loads", "0.5,0.9", "--setups", "LEAST_REQUEST,scored,scored x3", "--seeds", "4", "--fleet-set", "gpu_mem_util=0.5", "--caps-for-throughput", "--caps-at-mean"}, io.Discard)
	if err != nil || o.Requests != 50 || !o.CapsForThroughput || !o.CapsAtMean || len(o.Loads) != 2 || len(o.Setups) != 3 || o.Setups[2].Replicas != 3 || o.Seeds[0] != 4 ||
		o.Workload.TokenScale != 0.125 || o.FleetExtra["gpu_mem_util"] != 0.5 {
		t.Errorf("explicit flags must win over --short and the preset: %+v %v", o, err)
	}
	long, err := parseCompareFlags(nil, io.Discard)
	if err != nil || len(long.Loads) != 3 || long.Requests != 1300 || len(long.Setups) != len(compare.DefaultSetups()) {
		t.Errorf("long: %+v %v", long, err)
	}
	reuse, err := parseCompareFlags([]string{"--short", "--name", "mooncake-reuse", "--setups", "latency_based caps=batch-limit"}, io.Discard)
	if err != nil || reuse.Aims != compare.AimsReuse || reuse.FleetExtra != nil || reuse.Workload.TokenScale != 0.125 || len(reuse.Setups) != 1 || reuse.Setups[0].Caps != "batch-limit" {
		t.Errorf("mooncake-reuse: %+v %v", reuse, err)
	}
	for _, bad := range [][]string{{"--loads", "x"}, {"--setups", "fastest"}, {"--setups", "scored caps=oracle"}, {"--capacity-setup", "LEAST_REQUEST,scored"}, {"--name", "nope"}, {"--seeds", "a"}, {"--fleet-set", "x"}} {
		if _, err := parseCompareFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestHerdFlags(t *testing.T) {
	o, err := parseHerdFlags([]string{"--short"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Bursts != 10 || len(o.Strategies) != 2 || len(o.Replicas) != 2 || len(o.Baselines) != 1 {
		t.Errorf("short: %+v", o)
	}
	if _, err := parseHerdFlags([]string{"--replicas", "0"}, io.Discard); err == nil {
		t.Error("0 replicas accepted")
	}
}

func TestHarnessFlags(t *testing.T) {
	o, err := harnessFlags("sweep", []string{"--setup", "LEAST_REQUEST", "--requests", "5"}, io.Discard, nil)
	if err != nil || o.Setup.LBPolicy != "LEAST_REQUEST" || o.Requests != 5 {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := harnessFlags("sweep", []string{"--setup", "x,y"}, io.Discard, nil); err == nil {
		t.Error("two setups accepted")
	}
}

func TestFairnessCommand(t *testing.T) {
	var stdout, stderr strings.Builder
	if err := run(context.Background(), []string{"fairness", "--seeds", "2", "--scenarios", "two", "--duration", "2m"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "| llm-router-fair |") || !strings.Contains(stdout.String(), "| llm-d-rr |") {
		t.Fatalf("report:\n%s", stdout.String())
	}
	if err := run(context.Background(), []string{"fairness", "--scenarios", "nope"}, &stdout, &stderr); err == nil {
		t.Fatal("an unknown scenario was accepted")
	}
}
