package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

func TestParseFleet(t *testing.T) {
	gpus, err := Parse(Default)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range gpus {
		ids = append(ids, g.ID)
	}
	if got := strings.Join(ids, ","); got != "h100-0,h100-1,a100-0,a100-1,a40-0,a40-1" {
		t.Errorf("ids %s", got)
	}
	if gpus[2].Profile != "a100-llama3-8b" {
		t.Errorf("profile %s", gpus[2].Profile)
	}
	one, err := Parse("a40-llama2-7b")
	if err != nil || len(one) != 1 {
		t.Errorf("no count: %v %v", one, err)
	}
	for _, bad := range []string{"", "tpu-v5:2", "a40-llama2-7b:0", "a40-llama2-7b:x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseSetups(t *testing.T) {
	ss, err := ParseSetups("LEAST_REQUEST, scored,queue_kv_max_score")
	if err != nil || len(ss) != 3 {
		t.Fatalf("%v %v", ss, err)
	}
	if ss[0].Router() || ss[0].Name != "envoy LEAST_REQUEST" || !ss[1].Router() || ss[1].Strategy != "scored" {
		t.Errorf("%+v", ss)
	}
	for _, bad := range []string{"", "fastest", "Least_Request"} {
		if _, err := ParseSetups(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if ss, err := ParseSetups("scored x3, LEAST_REQUEST"); err != nil || len(ss) != 2 || ss[0].Replicas != 3 || ss[0].Name != "router scored x3" {
		t.Errorf("replicas: %+v %v", ss, err)
	}
	if _, err := ParseSetups("scored x99"); err == nil {
		t.Error("99 replicas accepted")
	}
	ss, err = ParseSetups("scored scoring.weights.prefix=100 x3")
	if err != nil || len(ss) != 1 || ss[0].Replicas != 3 || ss[0].Name != "router scored scoring.weights.prefix=100 x3" || !slices.Equal(ss[0].Settings, []string{"scoring.weights.prefix=100"}) {
		t.Errorf("settings: %+v %v", ss, err)
	}
	for _, bad := range []string{"scored scoring.weights.prefix=x", "scored no.such.key=1", "scored 3"} {
		if _, err := ParseSetups(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestParseCaps: caps= takes none, batch-limit, slo-sized or xF, names
// the setup by it (none, the default, unnamed), and gives each worker the
// max_concurrency it says; anything else is refused naming the choices.
func TestParseCaps(t *testing.T) {
	gpus := []GPU{{ID: "h100-0", Cap: 23, BatchLimit: 256}, {ID: "a40-0", Cap: 1, BatchLimit: 64}}
	for _, c := range []struct {
		setup, name string
		caps        []int
	}{
		{"scored", "router scored", []int{0, 0}},
		{"scored caps=none", "router scored", []int{0, 0}},
		{"latency_based caps=batch-limit", "router latency_based caps=batch-limit", []int{256, 64}},
		{"scored caps=slo-sized x3", "router scored x3 caps=slo-sized", []int{23, 1}},
		{"scored caps=x0.5", "router scored caps=x0.5", []int{12, 1}},
		{"scored caps=x4 adaptive_caps.enabled=true", "router scored adaptive_caps.enabled=true caps=x4", []int{92, 4}},
	} {
		ss, err := ParseSetups(c.setup)
		if err != nil || len(ss) != 1 {
			t.Errorf("%q: %v", c.setup, err)
			continue
		}
		var got []int
		for _, w := range Workers(gpus, ss[0]) {
			got = append(got, w.MaxConcurrency)
		}
		if ss[0].Name != c.name || !slices.Equal(got, c.caps) {
			t.Errorf("%q: name %q caps %v, want %q %v", c.setup, ss[0].Name, got, c.name, c.caps)
		}
	}
	for _, bad := range []string{"scored caps=x0", "scored caps=big", "scored caps=", "scored caps=x-1", "scored caps=xinf", "scored caps=4", "scored caps=None"} {
		_, err := ParseSetups(bad)
		if err == nil || !strings.Contains(err.Error(), "want caps=none|batch-limit|slo-sized or caps=xF") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want a refusal naming the setup and the choices", bad, err)
		}
	}
}

// The simulator registers the precise emulation in llm-bench; registered
// here the same way, it is still refused for real processes.
func TestParseSetupsRefusesSimulatorOnly(t *testing.T) {
	if !slices.Contains(scoring.Names(), emulate.PrecisePrefixQueueKVMaxScore) {
		scoring.RegisterStrategy(emulate.PrecisePrefixQueueKVMaxScore, func(scoring.Params) scoring.Strategy { return emulate.NewPrecisePrefix() })
	}
	if _, err := ParseSetups("scored," + emulate.PrecisePrefixQueueKVMaxScore); err == nil || !strings.Contains(err.Error(), "runs only in llm-bench sim") {
		t.Fatalf("the precise emulation was accepted for real processes (err %v)", err)
	}
}
