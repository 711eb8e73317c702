package scheduler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// observing is a stateful strategy: it prefers worker "b" and records what
// the scheduler tells it.
type observing struct {
	mu     sync.Mutex
	events []string
	jobs   []scoring.Job
	nows   []time.Time
}

var _ ClaimObserver = (*observing)(nil)

// observing registers as any strategy outside scoring does (the
// benchmark's emulations): by name, with a factory.
func init() {
	scoring.RegisterStrategy("observing", func(scoring.Params) scoring.Strategy { return &observing{} })
}

func (*observing) Name() string { return "observing" }

func (o *observing) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	o.mu.Lock()
	o.nows = append(o.nows, in.Now)
	o.mu.Unlock()
	out := make([]scoring.Candidate, 0, len(eligible))
	for _, w := range eligible {
		base := 1.0
		if w.ID == "b" {
			base = 0
		}
		out = append(out, scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Base: base}})
	}
	return out
}

func (o *observing) Claimed(id string, job scoring.Job, worker string, _ time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, "claimed "+id+" "+worker)
	o.jobs = append(o.jobs, job)
}

func (o *observing) Released(id string, _ time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, "released "+id)
}

func TestStatefulStrategyIsToldOfClaimAndRelease(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 4), spec("b", "m", 4))
	obs := &observing{}
	s.strategy, s.observer = obs, obs // as New does for a strategy that observes

	blocks := []uint64{1, 2, 3}
	tk, err := s.Admit(context.Background(), Request{ID: "r1", Model: "m", PromptTokens: 50, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Worker() != "b" {
		t.Fatalf("claimed %s, want the strategy's pick b", tk.Worker())
	}
	obs.mu.Lock()
	if want := []string{"claimed " + tk.ID + " b"}; !slices.Equal(obs.events, want) {
		t.Fatalf("events %v, want %v", obs.events, want)
	}
	if j := obs.jobs[0]; j.Model != "m" || j.PromptTokens != 50 || !slices.Equal(j.Blocks, blocks) {
		t.Fatalf("job %+v does not carry the request's blocks", j)
	}
	if obs.nows[0].IsZero() {
		t.Fatal("the plan was given no time")
	}
	obs.mu.Unlock()

	tk.Finish(Outcome{Status: 200})
	tk.Finish(Outcome{Status: 200}) // a second call releases nothing
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{"claimed " + tk.ID + " b", "released " + tk.ID}; !slices.Equal(obs.events, want) {
		t.Fatalf("events %v, want %v", obs.events, want)
	}
}

func TestBuiltInStrategiesObserveNothing(t *testing.T) {
	for _, name := range []string{scoring.RoundRobin, scoring.LeastLoaded, scoring.LatencyBased, scoring.InferenceAware, scoring.Scored} {
		s, _, _ := newTestScheduler(t, name, spec("a", "m", 1))
		if s.observer != nil {
			t.Errorf("%s: built-in strategies keep no per-replica state", name)
		}
	}
}

// A strategy registered outside scoring is selectable by name, each
// scheduler gets an instance of its own, and one that observes claims is
// told of them.
func TestRegisteredStrategyIsSelectableAndObserves(t *testing.T) {
	s, _, _ := newTestScheduler(t, "observing", spec("a", "m", 4), spec("b", "m", 4))
	other, _, _ := newTestScheduler(t, "observing", spec("a", "m", 4))
	if s.Strategy() != "observing" || s.observer == nil {
		t.Fatalf("strategy %s, observer %v", s.Strategy(), s.observer)
	}
	if s.observer == other.observer {
		t.Fatal("two schedulers share one instance of a stateful strategy")
	}
	tk, err := s.Admit(context.Background(), Request{ID: "r", Model: "m", PromptTokens: 64, Blocks: []uint64{1, 2, 3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(Outcome{Status: 200})
	obs := s.observer.(*observing)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{"claimed " + tk.ID + " b", "released " + tk.ID}; !slices.Equal(obs.events, want) {
		t.Fatalf("events %v, want %v", obs.events, want)
	}
}
