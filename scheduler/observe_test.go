package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// events is an Observer that writes down what it is told.
type events struct {
	mu  sync.Mutex
	got []string
}

var _ Observer = (*events)(nil)

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

func (e *events) Decided(d *Decision)           { e.add("decided %s %s", d.Model, d.Outcome) }
func (e *events) Rejected(model, reason string) { e.add("rejected %q %s", model, reason) }
func (e *events) Finished(d *Decision, worker string, _ time.Duration, o Outcome) {
	e.add("finished %s on %s %d", d.RequestID, worker, o.Status)
}
func (e *events) Moved(from, to string)                      { e.add("moved %s %s", from, to) }
func (e *events) PredictionErrors(_, _ latency.ErrorSummary) {}

func (e *events) Published(snap state.Snapshot, allow [3]int) {
	e.add("published %d %v", len(snap.Workers), allow)
}

// trips counts the store round trips by operation.
type trips struct {
	Store
	mu sync.Mutex
	n  map[string]int
}

func (c *trips) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

func (c *trips) Claim(ctx context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	c.count("claim")
	return c.Store.Claim(ctx, req)
}

func (c *trips) Release(ctx context.Context, r state.Release) (bool, error) {
	c.count("release")
	return c.Store.Release(ctx, r)
}

// TestObserverIsToldOfEachEventOnce: every decision, refusal, end, move
// and snapshot reaches the observer once, and an admitted request costs
// one claim and one release round trip, so a decorator on the store counts
// them exactly.
func TestObserverIsToldOfEachEventOnce(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 1), spec("b", "m", 1))
	obs := &events{}
	c := &trips{Store: s.store, n: map[string]int{}}
	s.obs, s.store = obs, c
	s.opts.Queue.MaxSize, s.opts.Queue.CriticalMultiplier, s.opts.Queue.BatchShare = 4, 2, 0.5

	ctx := context.Background()
	if _, err := s.Admit(ctx, Request{ID: "r0", Model: "nope"}); err == nil {
		t.Fatal("an unknown model was admitted")
	}
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	from := tk.Worker()
	to := map[string]string{"a": "b", "b": "a"}[from]
	tk.Moved(to)
	tk.Finish(Outcome{Status: 200})
	tk.Finish(Outcome{Status: 200}) // a second call tells nobody
	s.publish(s.Snapshot())

	want := []string{
		`rejected "" unknown_model`,
		"decided m claimed",
		"moved " + from + " " + to,
		"finished r1 on " + to + " 200",
		"published 2 [8 4 2]",
	}
	if !slices.Equal(obs.got, want) {
		t.Errorf("observer was told\n%q\nwant\n%q", obs.got, want)
	}
	if c.n["claim"] != 1 || c.n["release"] != 1 {
		t.Errorf("round trips %v, want one claim and one release", c.n)
	}
}
