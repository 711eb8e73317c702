package herd

import (
	"bytes"
	"strings"
	"testing"
)

func TestCollision(t *testing.T) {
	workers := []string{"g0", "g1", "g2", "g3"}
	tests := []struct {
		name      string
		nodes     []string
		collision bool
		idle      int
	}{
		{"one each", []string{"g2", "g0", "g3", "g1"}, false, 0},
		{"herd", []string{"g0", "g0", "g0", "g0"}, true, 3},
		{"two on one", []string{"g0", "g1", "g1", "g3"}, true, 1},
		// A failed request leaves a worker idle without a double-up: not a
		// collision (errors are counted apart).
		{"one failed", []string{"g0", "g1", "g2"}, false, 1},
		{"unknown worker ignored", []string{"g0", "g1", "g2", "g3", "other"}, false, 0},
		{"none", nil, false, 4},
	}
	for _, tt := range tests {
		col, idle := collision(tt.nodes, workers)
		if col != tt.collision || idle != tt.idle {
			t.Errorf("%s: collision %v idle %d, want %v %d", tt.name, col, idle, tt.collision, tt.idle)
		}
	}
}

func TestReport(t *testing.T) {
	yes := true
	rep := &Report{Command: "llm-bench herd", Workers: 4, Results: []Result{
		{Setup: "router scored", Replicas: 3, AtomicClaim: &yes, Bursts: 10, Collisions: 0},
		{Setup: "envoy LEAST_REQUEST", Bursts: 10, Collisions: 9, CollisionRate: 0.9},
	}}
	var b bytes.Buffer
	rep.Markdown(&b)
	if !strings.Contains(b.String(), "| router scored | 3 | true | 10 | 0 | 0% |") || !strings.Contains(b.String(), "| envoy LEAST_REQUEST | - | - | 10 | 9 | 90% |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}
