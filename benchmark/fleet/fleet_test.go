package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/config"
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
	ss, err = ParseSetups("scored caps=x4 adaptive_caps.enabled=true")
	if err != nil || len(ss) != 1 || ss[0].CapScale != 4 || ss[0].Name != "router scored adaptive_caps.enabled=true caps=x4" {
		t.Errorf("caps: %+v %v", ss, err)
	}
	ws := ScaleCaps([]config.Worker{{MaxConcurrency: 23}, {MaxConcurrency: 1}}, 0.5)
	if ws[0].MaxConcurrency != 12 || ws[1].MaxConcurrency != 1 {
		t.Errorf("caps x0.5 of 23 and 1: %d %d, want 12 and 1", ws[0].MaxConcurrency, ws[1].MaxConcurrency)
	}
	for _, bad := range []string{"scored scoring.weights.prefix=x", "scored no.such.key=1", "scored 3", "scored caps=x0", "scored caps=big"} {
		if _, err := ParseSetups(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The simulator registers the precise emulation in llm-bench; registered
// here the same way, it is still refused for real processes.
func TestParseSetupsRefusesSimulatorOnly(t *testing.T) {
	if !slices.Contains(scoring.Names(), emulate.PrecisePrefixQueueKVMaxScore) {
		scoring.RegisterStrategy(emulate.PrecisePrefixQueueKVMaxScore, func(scoring.Params) scoring.Strategy { return emulate.NewPrecisePrefix() })
	}
	if _, err := ParseSetups("scored," + emulate.PrecisePrefixQueueKVMaxScore); err == nil || !strings.Contains(err.Error(), "KV events") {
		t.Fatalf("the precise emulation was accepted for real processes (err %v)", err)
	}
}
