package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

type recorder struct {
	mu sync.Mutex
	ds []*Decision
}

func (r *recorder) Record(d *Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
}

func newTestScheduler(t *testing.T, strategy string, specs ...state.WorkerSpec) (*Scheduler, *memory.Store, *recorder) {
	t.Helper()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s, err := New(store, Options{
		Strategy: strategy,
		Params: scoring.Params{
			Weights:      scoring.Weights{Active: 100, Terms: scoring.DefaultTermWeights()},
			JobCostScale: 10 * time.Second, MinSamples: 3, Staleness: time.Minute, LoadPenalty: 0.1,
		},
		ReplicaID: "test",
		Recorder:  rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, store, rec
}

func spec(id, model string, cap int) state.WorkerSpec {
	return state.WorkerSpec{ID: id, Address: id + ":80", Models: []string{model}, MaxConcurrency: cap}
}

func TestAdmitErrors(t *testing.T) {
	ctx := context.Background()
	s, store, rec := newTestScheduler(t, "scored", spec("a", "m", 1), spec("b", "n", 1))

	_, err := s.Admit(ctx, Request{ID: "r1", Model: "nope"})
	var me *ModelError
	if !errors.Is(err, ErrUnknownModel) || !errors.As(err, &me) || me.Model != "nope" {
		t.Fatalf("unknown model: %v", err)
	}

	t1, err := s.Admit(ctx, Request{ID: "r2", Model: "m"})
	if err != nil || t1.Worker() != "a" {
		t.Fatalf("admit: %v", err)
	}
	_, err = s.Admit(ctx, Request{ID: "r3", Model: "m"})
	if !errors.Is(err, ErrAtCapacity) || RetryAfterOf(err) <= 0 {
		t.Fatalf("at capacity: %v", err)
	}
	t1.Finish(Outcome{Status: 200})
	t1.Finish(Outcome{Status: 200}) // harmless

	if err := store.SetHealth(ctx, "b", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Admit(ctx, Request{ID: "r4", Model: "n"})
	if !errors.Is(err, ErrNoHealthyWorker) || RetryAfterOf(err) <= 0 {
		t.Fatalf("no healthy: %v", err)
	}
	// The snapshot can lag the store: a worker unhealthy only in the live
	// state is still refused at claim time.
	if err := store.SetHealth(ctx, "a", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if _, err = s.Admit(ctx, Request{ID: "r5", Model: "m"}); !errors.Is(err, ErrNoHealthyWorker) {
		t.Fatalf("live health ignored: %v", err)
	}

	outcomes := map[string]string{}
	for _, d := range rec.ds {
		outcomes[d.RequestID] = d.Outcome
	}
	want := map[string]string{"r2": OutcomeClaimed, "r3": OutcomeAtCapacity, "r4": OutcomeNoHealthy, "r5": OutcomeNoHealthy}
	for id, o := range want {
		if outcomes[id] != o {
			t.Errorf("decision %s outcome %q, want %q", id, outcomes[id], o)
		}
	}
}

func TestDecisionRecordsTheBreakdown(t *testing.T) {
	ctx := context.Background()
	s, _, rec := newTestScheduler(t, "scored", spec("a", "m", 4), spec("b", "m", 4))
	held, err := s.Admit(ctx, Request{ID: "first", Model: "m", MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	slo := SLO{TTFT: NewObjective(300*time.Millisecond, SLOHeader), TPOT: NewObjective(50*time.Millisecond, SLODefault)}
	next, err := s.Admit(ctx, Request{ID: "second", Model: "m", MaxTokens: 10, SLO: slo})
	if err != nil {
		t.Fatal(err)
	}
	if next.Worker() == held.Worker() {
		t.Fatalf("the second request joined the first on %s while the other worker idled", held.Worker())
	}
	d := rec.ds[1]
	if d.Worker != next.Worker() || len(d.Candidates) != 2 || d.Strategy != "scored" || d.SLO != slo {
		t.Fatalf("decision %+v", d)
	}
	for _, c := range d.Candidates {
		wantActive := 0
		if c.Worker == held.Worker() {
			wantActive = 1
		}
		if c.Active != wantActive || c.Total != float64(100*wantActive) {
			t.Fatalf("candidate %+v: live count not recorded", c)
		}
	}
	if len(d.Unknown) == 0 {
		t.Fatalf("no telemetry yet: terms must be flagged unknown")
	}
	held.Finish(Outcome{Status: 200})
	next.Finish(Outcome{Status: 200})
}

func TestFinishFeedsAveragesAndMoveFollows(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestScheduler(t, "least_loaded", spec("a", "m", 4), spec("b", "m", 4))
	tk, err := s.Admit(ctx, Request{ID: "r", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"a": "b", "b": "a"}[tk.Worker()]
	tk.Moved(other)
	tk.Moved("unknown-worker") // ignored
	tk.Finish(Outcome{Status: 200, TTFT: 50 * time.Millisecond, TokensPerSec: 30, CompletionTokens: 10})
	snap, _ := store.Snapshot(ctx)
	for _, w := range snap.Workers {
		if w.InFlight != 0 {
			t.Fatalf("%s in flight %d", w.Spec.ID, w.InFlight)
		}
		if w.Spec.ID == other && (w.Stats.TTFT.Samples != 1 || w.Stats.TokensPerSec.Value != 30 || w.Stats.Latency.Samples != 1) {
			t.Fatalf("averages not fed on the serving worker: %+v", w.Stats)
		}
	}
	if s.LiveClaims() != 0 {
		t.Fatalf("claims left: %d", s.LiveClaims())
	}
}

func TestAbortedRequestsFeedNoAverage(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestScheduler(t, "scored", spec("a", "m", 4))
	tk, _ := s.Admit(ctx, Request{ID: "r", Model: "m"})
	tk.Finish(Outcome{Aborted: true})
	snap, _ := store.Snapshot(ctx)
	if st := snap.Workers[0].Stats; st.Latency.Samples != 0 || snap.Workers[0].InFlight != 0 {
		t.Fatalf("aborted request: %+v in flight %d", st, snap.Workers[0].InFlight)
	}
}

// TestHerdThroughTheScheduler: simultaneous admissions on a stale snapshot
// (all workers idle) still land one per worker, because the claim reads
// live counts.
func TestHerdThroughTheScheduler(t *testing.T) {
	ctx := context.Background()
	var specs []state.WorkerSpec
	for i := 0; i < 4; i++ {
		specs = append(specs, spec(fmt.Sprintf("w%d", i), "m", 4))
	}
	s, _, _ := newTestScheduler(t, "scored", specs...)
	for trial := 0; trial < 200; trial++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		tickets := make([]*Ticket, 4)
		for i := range tickets {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				tk, err := s.Admit(ctx, Request{ID: fmt.Sprint(i), Model: "m"})
				if err != nil {
					t.Error(err)
					return
				}
				tickets[i] = tk
			}(i)
		}
		close(start)
		wg.Wait()
		seen := map[string]bool{}
		for _, tk := range tickets {
			if tk == nil {
				t.FailNow()
			}
			if seen[tk.Worker()] {
				t.Fatalf("trial %d: two requests on %s", trial, tk.Worker())
			}
			seen[tk.Worker()] = true
		}
		for _, tk := range tickets {
			tk.Finish(Outcome{Status: 200})
		}
	}
}

func BenchmarkAdmitFinish(b *testing.B) {
	ctx := context.Background()
	store := memory.New(nil, state.Limits{})
	var specs []state.WorkerSpec
	for i := 0; i < 64; i++ {
		specs = append(specs, spec(fmt.Sprintf("w%d", i), "m", 1<<20))
	}
	_ = store.Register(ctx, specs)
	s, err := New(store, Options{Strategy: "scored", Params: scoring.Params{Weights: scoring.Weights{Active: 100}}})
	if err != nil {
		b.Fatal(err)
	}
	_ = s.Refresh(ctx)
	b.ReportAllocs()
	for b.Loop() {
		tk, err := s.Admit(ctx, Request{ID: "r", Model: "m", MaxTokens: 100})
		if err != nil {
			b.Fatal(err)
		}
		tk.Finish(Outcome{Status: 200})
	}
}

// TestStaleTelemetryIsUnknown: a worker-reported value older than its
// staleness bound is unknown in the decision, never an idle zero.
func TestStaleTelemetryIsUnknown(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil, state.Limits{})
	_ = store.Register(ctx, []state.WorkerSpec{spec("fresh", "m", 4), spec("stale", "m", 4)})
	now := time.Now()
	_ = store.PutTelemetry(ctx, map[string]state.Telemetry{
		"fresh": {KVUsage: state.Sample{Value: 0.9, At: now}, Waiting: state.Sample{Value: 2, At: now}, At: now},
		"stale": {KVUsage: state.Sample{Value: 0.9, At: now.Add(-time.Minute)}, At: now.Add(-time.Minute)},
	})
	rec := &recorder{}
	s, err := New(store, Options{
		Strategy: "scored", Recorder: rec, TelemetryStale: 2 * time.Second,
		Params: scoring.Params{Weights: scoring.Weights{Active: 100, Terms: map[string]float64{"queue": 10, "kv_pressure": 15}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Refresh(ctx)
	tk, err := s.Admit(ctx, Request{ID: "r", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Finish(Outcome{Status: 200})
	for _, c := range rec.ds[0].Candidates {
		for _, term := range c.Terms {
			if term.Name != "kv_pressure" {
				continue
			}
			if c.Worker == "stale" && !term.Unknown {
				t.Fatalf("a minute-old KV usage was used: %+v", term)
			}
			if c.Worker == "fresh" && (term.Unknown || term.Value != 0.9) {
				t.Fatalf("fresh KV usage not used: %+v", term)
			}
		}
	}
	if tk.Worker() != "stale" {
		// 15·0.9 for fresh against an unknown (0) for stale.
		t.Fatalf("picked %s", tk.Worker())
	}
}

// TestQueueTimeoutsHaveNoHiddenDefault: the queue timeouts' defaults live
// in one place, the config (60/30/15 s); a scheduler asked to queue without
// them refuses rather than fall back to a second, different default.
func TestQueueTimeoutsHaveNoHiddenDefault(t *testing.T) {
	store := memory.New(nil, state.Limits{})
	tests := []struct {
		name     string
		queue    QueueOptions
		wantFail bool
	}{
		{"queueing off needs none", QueueOptions{}, false},
		{"queueing on, none set", QueueOptions{MaxSize: 4}, true},
		{"queueing on, one missing", QueueOptions{MaxSize: 4, Timeouts: [3]time.Duration{time.Second, time.Second, 0}}, true},
		{"queueing on, all set", QueueOptions{MaxSize: 4, Timeouts: [3]time.Duration{3 * time.Second, 2 * time.Second, time.Second}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(store, Options{Strategy: scoring.Scored, Queue: tc.queue})
			if (err != nil) != tc.wantFail {
				t.Fatalf("err %v, want failure %v", err, tc.wantFail)
			}
		})
	}
}
