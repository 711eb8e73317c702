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

func loraSpec(id string, slots int, adapters ...string) state.WorkerSpec {
	s := spec(id, "base", 0)
	s.MaxLoras = slots
	for _, a := range adapters {
		s.Adapters = append(s.Adapters, state.Adapter{Name: a, Base: "base", Path: "/lora/" + a})
	}
	return s
}

func TestAdapterEligibility(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestScheduler(t, scoring.Predicted,
		loraSpec("a", 2, "sql"), loraSpec("b", 2, "chat"), spec("c", "other", 0))
	cases := []struct {
		model   string
		workers []string // eligible
		unknown bool
	}{
		{model: "sql", workers: []string{"a"}},
		{model: "chat", workers: []string{"b"}},
		{model: "base", workers: []string{"a", "b"}},
		{model: "nope", unknown: true},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			tk, err := s.Admit(ctx, Request{ID: tc.model, Model: tc.model})
			if tc.unknown {
				var me *ModelError
				if !errors.Is(err, ErrUnknownModel) || !errors.As(err, &me) || me.Model != tc.model {
					t.Fatalf("err %v; want unknown model naming %s", err, tc.model)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Finish(Outcome{Status: 200})
			if tk.Model() != "base" {
				t.Fatalf("runs on model %q; want the base", tk.Model())
			}
			var got []string
			for _, c := range tk.Decision.Candidates {
				got = append(got, c.Worker)
			}
			if fmt.Sprint(sortedCopy(got)) != fmt.Sprint(tc.workers) {
				t.Fatalf("candidates %v; want %v", got, tc.workers)
			}
			if tc.model != "base" && (tk.Decision.Adapter == nil || tk.Decision.Adapter.Name != tc.model || tk.Decision.Adapter.State != "free_slot") {
				t.Fatalf("decision's adapter %+v; want %s, free_slot", tk.Decision.Adapter, tc.model)
			}
		})
	}
	if got := s.Adapters(); len(got) != 2 || got[0] != (state.Adapter{Name: "chat", Base: "base"}) || got[1] != (state.Adapter{Name: "sql", Base: "base"}) {
		t.Fatalf("adapters listed %+v", got)
	}
}

func sortedCopy(xs []string) []string {
	out := append([]string(nil), xs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestAdapterFollowsPlacement: a request for an adapter lands where the
// adapter is placed while that costs less than a load; once the queue on
// the warm worker outweighs the load, a cold one takes it.
func TestAdapterFollowsPlacement(t *testing.T) {
	ctx := context.Background()
	s, _, rec := newTestScheduler(t, scoring.Predicted, loraSpec("a", 2, "sql"), loraSpec("b", 2, "sql"))
	first, err := s.Admit(ctx, Request{ID: "r0", Model: "sql", PromptTokens: 100, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	warm := first.Worker()
	for i := 1; i < 3; i++ {
		tk, err := s.Admit(ctx, Request{ID: fmt.Sprint("r", i), Model: "sql", PromptTokens: 100, MaxTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		if tk.Worker() != warm || tk.Decision.Adapter.State != "active" {
			t.Fatalf("request %d on %s (%s); want %s, where sql is active", i, tk.Worker(), tk.Decision.Adapter.State, warm)
		}
		var cold scoring.Line
		for _, c := range tk.Decision.Candidates {
			if c.Worker != warm {
				cold = c
			}
		}
		if cold.Adapter != "free_slot" || adapterTerm(cold) != DefaultAdapterLoadTime.Seconds() {
			t.Fatalf("cold candidate %+v; want free_slot priced at the prior load time", cold)
		}
	}
	// Load the warm worker far past a load's worth of queueing.
	var held []*Ticket
	for i := range 200 {
		tk, err := s.Admit(ctx, Request{ID: fmt.Sprint("big", i), Model: "sql", PromptTokens: 4000, MaxTokens: 500})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, tk)
		if tk.Worker() != warm {
			if tk.Decision.Adapter.State != "free_slot" || tk.Decision.Prediction.TTFTSeconds < DefaultAdapterLoadTime.Seconds() {
				t.Fatalf("spill %+v, prediction %+v; want a free slot, the load in the TTFT", tk.Decision.Adapter, tk.Decision.Prediction)
			}
			for _, h := range held {
				h.Finish(Outcome{Status: 200})
			}
			first.Finish(Outcome{Status: 200})
			_ = rec
			return
		}
	}
	t.Fatal("200 long requests never spilled the adapter onto the cold worker")
}

func adapterTerm(l scoring.Line) float64 {
	for _, t := range l.Terms {
		if t.Name == "adapter" {
			return t.Value
		}
	}
	return -1
}

// fakeLoader is an engine's adapter API: it counts loads and fails on
// the workers listed in fail.
type fakeLoader struct {
	mu     sync.Mutex
	loads  map[string]int // address → loads
	unload []string
	fail   map[string]bool
}

func (f *fakeLoader) Load(_ context.Context, addr string, a state.Adapter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads == nil {
		f.loads = map[string]int{}
	}
	f.loads[addr]++
	if f.fail[addr] {
		return fmt.Errorf("engine at %s: adapter %s: no such path %s", addr, a.Name, a.Path)
	}
	return nil
}

func (f *fakeLoader) Unload(_ context.Context, addr, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unload = append(f.unload, addr+" "+name)
	return nil
}

func newLoaderScheduler(t *testing.T, l AdapterLoader, specs ...state.WorkerSpec) *Scheduler {
	t.Helper()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	s, err := New(store, Options{Strategy: scoring.Predicted, ReplicaID: "test", Adapters: AdapterOptions{Loader: l, LoadTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAdapterManagedLoad(t *testing.T) {
	ctx := context.Background()
	l := &fakeLoader{}
	s := newLoaderScheduler(t, l, loraSpec("a", 1, "sql", "chat"))
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "sql"})
	if err != nil {
		t.Fatal(err)
	}
	d := tk.Decision.Adapter
	if l.loads["a:80"] != 1 || len(d.Loads) != 1 || d.Loads[0].Error != "" {
		t.Fatalf("loads %v, decision %+v; want one load on a", l.loads, d)
	}
	tk.Finish(Outcome{Status: 200})
	// Placed: no second load.
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	tk, err = s.Admit(ctx, Request{ID: "r2", Model: "sql"})
	if err != nil {
		t.Fatal(err)
	}
	if l.loads["a:80"] != 1 || len(tk.Decision.Adapter.Loads) != 0 {
		t.Fatalf("loads %v; want still one", l.loads)
	}
	tk.Finish(Outcome{Status: 200})
	// One slot: chat evicts sql, which the router unloads.
	tk, err = s.Admit(ctx, Request{ID: "r3", Model: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Decision.Adapter.Evicted != "sql" || len(l.unload) != 1 || l.unload[0] != "a:80 sql" || l.loads["a:80"] != 2 {
		t.Fatalf("decision %+v, unloads %v, loads %v; want sql unloaded, chat loaded", tk.Decision.Adapter, l.unload, l.loads)
	}
	tk.Finish(Outcome{Status: 200})
}

func TestAdapterLoadFailureRetriesOnce(t *testing.T) {
	ctx := context.Background()
	l := &fakeLoader{fail: map[string]bool{"a:80": true}}
	s := newLoaderScheduler(t, l, loraSpec("a", 1, "sql"), loraSpec("b", 1, "sql"))
	// a fails, b loads: whichever is tried first, the request runs on b.
	tk, err := s.Admit(ctx, Request{ID: "r1", Model: "sql"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Worker() != "b" {
		t.Fatalf("on %s; want b, the worker whose load succeeds", tk.Worker())
	}
	tk.Finish(Outcome{Status: 200})
	if s.LiveClaims() != 0 {
		t.Fatalf("%d claims held after the request; want none leaked", s.LiveClaims())
	}

	// Both fail: one retry, then the engine's reason.
	l = &fakeLoader{fail: map[string]bool{"a:80": true, "b:80": true}}
	s = newLoaderScheduler(t, l, loraSpec("a", 1, "sql"), loraSpec("b", 1, "sql"))
	_, err = s.Admit(ctx, Request{ID: "r2", Model: "sql"})
	if !errors.Is(err, ErrAdapterLoad) || l.loads["a:80"]+l.loads["b:80"] != 2 {
		t.Fatalf("err %v after loads %v; want ErrAdapterLoad after two", err, l.loads)
	}
	if got := err.Error(); !contains(got, "no such path") {
		t.Fatalf("error %q does not carry the engine's reason", got)
	}
	if s.LiveClaims() != 0 {
		t.Fatalf("%d claims held after the failure; want none leaked", s.LiveClaims())
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestAdapterLoadedAfterQueue: a request for an adapter that waited in
// the queue is loaded on the worker its grant gives it (with lora.manage).
func TestAdapterLoadedAfterQueue(t *testing.T) {
	ctx := context.Background()
	l := &fakeLoader{}
	w := loraSpec("a", 2)
	w.MaxConcurrency = 1
	store := memory.New(nil, state.Limits{})
	if err := store.Register(ctx, []state.WorkerSpec{w}); err != nil {
		t.Fatal(err)
	}
	s, err := New(store, Options{
		Strategy: scoring.Predicted, ReplicaID: "test",
		Queue: QueueOptions{MaxSize: 4, Timeouts: [3]time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, PollEvery: 10 * time.Millisecond},
		Adapters: AdapterOptions{Loader: l, LoadTimeout: time.Second, Catalog: []state.Adapter{
			{Name: "sql", Base: "base", Path: "/lora/sql"}, {Name: "chat", Base: "base", Path: "/lora/chat"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := s.Admit(ctx, Request{ID: "r1", Model: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var second *Ticket
	go func() {
		var err error
		second, err = s.Admit(ctx, Request{ID: "r2", Model: "sql"})
		done <- err
	}()
	err = waitUntil(func() bool { return s.Waiting() == 1 })
	if err != nil {
		t.Fatal(err)
	}
	first.Finish(Outcome{Status: 200})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer second.Finish(Outcome{Status: 200})
	if second.Worker() != "a" || l.loads["a:80"] != 2 {
		t.Fatalf("granted %s after loads %v; want chat then sql loaded on a", second.Worker(), l.loads)
	}
}

// waitUntil polls cond every millisecond for up to 5 seconds.
func waitUntil(cond func() bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
