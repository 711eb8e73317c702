package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
)

// With every GPU capped at one request, the router's own queue holds the
// rest in virtual time: a request waits until a GPU frees (its claim comes
// after its arrival, at the end of another request), or leaves after the
// queue's timeout refused; the same seed gives the same run.
func TestQueueInVirtualTime(t *testing.T) {
	s := smallStudy()
	for i := range s.GPUs {
		s.GPUs[i].MaxConcurrency = 1
	}
	s.Workload.SharedPrefix.OutputLen = 2000 // each request holds its GPU ~30 s
	a := runOnce(t, s, "scored", 2, 3)
	timeout := config.Default().Queue.Timeout.Standard.D()
	var waited, refused int
	for i, q := range a.Requests {
		switch q.Outcome {
		case OutcomeOK:
			if q.FirstToken-q.Arrival > time.Second {
				waited++
				// It was claimed when another request on its GPU ended.
				if !endsAt(a.Requests, q.GPU, q.FirstToken) {
					t.Errorf("request %d waited %v, but no request on GPU %d ended before its first token", i, q.FirstToken-q.Arrival, q.GPU)
				}
				if q.FirstToken-q.Arrival > timeout+5*time.Second {
					t.Errorf("request %d waited %v, past the %v timeout", i, q.FirstToken-q.Arrival, timeout)
				}
			}
		case OutcomeRefused:
			refused++
		}
	}
	t.Logf("%d waited, %d refused", waited, refused)
	if waited == 0 || refused == 0 {
		t.Fatalf("%d requests waited and were served, %d refused: want both", waited, refused)
	}
	if b := runOnce(t, s, "scored", 2, 3); !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same seed with a queue differ")
	}
}

// endsAt reports whether a request on GPU g finished before at.
func endsAt(rs []Result, g int, at time.Duration) bool {
	for _, r := range rs {
		if r.GPU == g && r.Outcome == OutcomeOK && r.Done <= at {
			return true
		}
	}
	return false
}

// Each configuration's TTFT p90 is set against the baselines run at its
// replicas and rate, and only those: the ratio is its p90 over theirs.
func TestRatiosToTheBaselines(t *testing.T) {
	s := smallStudy()
	s.Strategies = []string{"round_robin", "scored"}
	s.Replicas = []int{1, 2}
	rep, err := Execute(s, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Summaries {
		if m.Strategy == "round_robin" {
			if len(m.P90Ratio) != 0 {
				t.Fatalf("the baseline has ratios %v", m.P90Ratio)
			}
			continue
		}
		var base Summary
		for _, b := range rep.Summaries {
			if b.Strategy == "round_robin" && b.Replicas == m.Replicas {
				base = b
			}
		}
		e, ok := m.P90Ratio["round_robin"]
		if !ok || len(m.P90Ratio) != 1 || e.Value != m.TTFT[1].Value/base.TTFT[1].Value || !(e.Lo <= e.Value && e.Value <= e.Hi) {
			t.Fatalf("%d replicas: ratios %v, want round_robin's %v/%v", m.Replicas, m.P90Ratio, m.TTFT[1].Value, base.TTFT[1].Value)
		}
	}
}

// predicted, past what the fleet can serve within the default 2 s TTFT
// objective, queues requests for their objective, and the
// same seed still gives the same run: the waiters' requeue timers and
// rebinds run in virtual time.
func TestObjectiveQueueDeterministic(t *testing.T) {
	s := smallStudy()
	s.QPS = []float64{40}
	s.Workload.SharedPrefix = SharedPrefix{NumGroups: 60, NumPromptsPerGroup: 5, SystemPromptLen: 4000, QuestionLen: 800, OutputLen: 300}
	a := runOnce(t, s, "predicted", 2, 5)
	if a.Queued == 0 {
		t.Fatal("nothing queued for its objective")
	}
	if b := runOnce(t, s, "predicted", 2, 5); !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same seed with objective waits differ")
	}
	t.Logf("%d of %d queued, %v waited", a.Queued, a.Decisions, a.Waited)
}
