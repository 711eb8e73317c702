package emulate

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
)

func TestLoRAScoreLevels(t *testing.T) {
	tests := []struct {
		name string
		info LoRAInfo
		want float64
	}{
		{"active", LoRAInfo{Running: []string{"x", "a"}, MaxLoras: 2}, 1},
		{"active on a full endpoint", LoRAInfo{Running: []string{"a", "b"}, Waiting: []string{"c"}, MaxLoras: 2}, 1},
		{"a free slot", LoRAInfo{Running: []string{"x"}, MaxLoras: 2}, 0.8},
		{"waiting counts towards the slots in use", LoRAInfo{Running: []string{"x"}, Waiting: []string{"y"}, MaxLoras: 2}, 0},
		{"running and waiting counted once", LoRAInfo{Running: []string{"x"}, Waiting: []string{"x"}, MaxLoras: 2}, 0.8},
		{"waiting on a full endpoint", LoRAInfo{Running: []string{"x", "y"}, Waiting: []string{"a"}, MaxLoras: 2}, 0.6},
		{"full, not there", LoRAInfo{Running: []string{"x", "y"}, MaxLoras: 2}, 0},
		{"no LoRA", LoRAInfo{}, 0},
	}
	for _, tt := range tests {
		if got := loraScore(tt.info, "a"); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLoRAAffinityPlan(t *testing.T) {
	lora := func(ws []scoring.Worker) []scoring.Worker {
		for i := range ws {
			ws[i].Adapters, ws[i].MaxLoras = []string{"a"}, 2
		}
		return ws
	}
	j := scoring.Job{Model: "m", Adapter: "a", PromptTokens: 100}
	pickFor := func(l *LoRAAffinity, ws []scoring.Worker, active []int) string {
		plan := scoring.Build(l, scoring.Input{Job: j, Workers: ws})
		i := scoring.Pick(plan.Candidates, active, nil)
		if i < 0 {
			t.Fatal("no pick")
		}
		return plan.Candidates[i].Worker
	}

	l := NewLoRAAffinity()
	l.Observe("w1", LoRAInfo{Running: []string{"x", "y"}, MaxLoras: 2})
	l.Observe("w2", LoRAInfo{Running: []string{"a", "y"}, MaxLoras: 2})
	l.Observe("w3", LoRAInfo{Running: []string{"x"}, MaxLoras: 2})
	if got := pickFor(l, lora(fleet(3)), []int{0, 0, 0}); got != "w2" {
		t.Errorf("adapter active on w2: picked %s", got)
	}

	// A queue on the warm endpoint (2·1 of queue score) outweighs the
	// LoRA score's 1.0 − 0.8: the free slot wins.
	ws := lora(fleet(3))
	ws[1].Queue = scoring.Known(4)
	if got := pickFor(l, ws, []int{0, 0, 0}); got != "w3" {
		t.Errorf("queue on the warm endpoint: picked %s, want the free slot w3", got)
	}

	// No view of in-flight claims (metrics only).
	if got := pickFor(l, lora(fleet(3)), []int{9, 0, 0}); got != "w2" {
		t.Errorf("claims changed the pick: %s", got)
	}

	// Terms add up to the score, and the product's adapter prices are
	// not added.
	plan := scoring.Build(l, scoring.Input{Job: j, Workers: lora(fleet(3))})
	for _, c := range plan.Candidates {
		if c.Adapter != (scoring.AdapterWeights{}) {
			t.Errorf("%s: the product's adapter weights %+v on an emulation", c.Worker, c.Adapter)
		}
		sum := 0.0
		for _, term := range c.Terms {
			sum += term.Contribution()
		}
		if sum != -c.Curve.Base {
			t.Errorf("%s: terms add to %v, score %v", c.Worker, sum, -c.Curve.Base)
		}
	}
}
