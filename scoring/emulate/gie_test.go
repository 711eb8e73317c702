package emulate

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
)

func TestQueueKVMaxScore(t *testing.T) {
	ws := fleet(2)
	ws[0].Queue, ws[0].KVPressure = scoring.Known(4), scoring.Known(0.2)
	ws[1].Queue, ws[1].KVPressure = scoring.Known(0), scoring.Known(0.3)
	plan := scoring.Build(queueKVMaxScore{}, scoring.Input{Job: job(seq(1, 2)), Workers: ws})
	if i := scoring.Pick(plan.Candidates, []int{0, 0}, nil); i < 0 || plan.Candidates[i].Worker != "w2" {
		t.Errorf("short queue and free KV: picked %d of %+v", i, plan.Candidates)
	}
	// No view of in-flight claims: three on w1 change nothing.
	ws = fleet(2)
	ws[0].KVPressure, ws[1].KVPressure = scoring.Known(0.1), scoring.Known(0.5)
	plan = scoring.Build(queueKVMaxScore{}, scoring.Input{Job: job(seq(1, 2)), Workers: ws})
	if i := scoring.Pick(plan.Candidates, []int{3, 0}, nil); i < 0 || plan.Candidates[i].Worker != "w1" {
		t.Errorf("in-flight claims: picked %d of %+v", i, plan.Candidates)
	}
}
