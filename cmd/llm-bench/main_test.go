package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
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
	if len(o.Loads) != 1 || o.Loads[0] != 0.8 || o.Requests != 500 || o.ProbeRequests != 1000 || o.MaxProbes != 4 || o.Grace != 15*time.Second {
		t.Errorf("short: %+v", o)
	}
	if len(o.Setups) != 8 || o.CapacitySetup.Name != "envoy LEAST_REQUEST" {
		t.Errorf("setups %v, capacity setup %v", o.Setups, o.CapacitySetup)
	}
	o, err = parseCompareFlags([]string{"--short", "--requests", "50", "--loads", "0.5,0.9", "--setups", "LEAST_REQUEST,scored"}, io.Discard)
	if err != nil || o.Requests != 50 || len(o.Loads) != 2 || len(o.Setups) != 2 {
		t.Errorf("explicit flags must win over --short: %+v %v", o, err)
	}
	long, err := parseCompareFlags(nil, io.Discard)
	if err != nil || len(long.Loads) != 3 || long.Requests != 1200 {
		t.Errorf("long: %+v %v", long, err)
	}
	for _, bad := range [][]string{{"--loads", "x"}, {"--setups", "fastest"}, {"--capacity-setup", "LEAST_REQUEST,scored"}} {
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
