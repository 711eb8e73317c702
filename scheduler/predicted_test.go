package scheduler

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// learningStore is the memory store with the latency statistics and first
// tokens kept beside it, shown in its snapshots.
type learningStore struct {
	*memory.Store
	mu     sync.Mutex
	stats  map[string]map[string]latency.Stats // worker → model
	firsts []string
	adds   []state.LatencyContribution
}

var _ Learner = (*learningStore)(nil)

func (l *learningStore) Snapshot(ctx context.Context) (state.Snapshot, error) {
	snap, err := l.Store.Snapshot(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range snap.Workers {
		if ms, ok := l.stats[w.Spec.ID]; ok {
			snap.Workers[i].LatencyStats = map[string]latency.Stats{}
			for m, st := range ms {
				snap.Workers[i].LatencyStats[m] = st
			}
		}
	}
	return snap, err
}

func (l *learningStore) AddLatency(_ context.Context, cs []state.LatencyContribution) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := latency.DefaultConfig()
	for _, c := range cs {
		if l.stats[c.Worker] == nil {
			l.stats[c.Worker] = map[string]latency.Stats{}
		}
		l.stats[c.Worker][c.Model] = cfg.Add(l.stats[c.Worker][c.Model], c.Stats)
		l.adds = append(l.adds, c)
	}
	return nil
}

func (l *learningStore) FirstToken(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.firsts = append(l.firsts, id)
	return nil
}

// clock is a settable time, or the real one.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	real bool
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		return time.Now()
	}
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// truth is a worker's true latency: TTFT = 0.05 + 0.5·W + 0.02·D +
// 0.007·W·D, TPOT = 0.02 + 0.001·R + 0.0005·T (seconds, tokens in
// thousands).
func truth() latency.Model {
	var m latency.Model
	m.TTFT.Coef = [4]float64{0.05, 0.5, 0.02, 0.007}
	m.TPOT.Coef = [4]float64{0.02, 0.001, 0.0005, 0}
	return m
}

// trained is the stats of n observations of truth ending at end.
func trained(n int, end time.Time) latency.Stats {
	cfg := latency.DefaultConfig()
	var st latency.Stats
	var m latency.Model
	for i := range n {
		f := latency.Features{Running: i % 40, PrefillTokens: (i * 397) % 4000, DecodeTokens: (i * 911) % 30000, Uncached: 100 + (i*131)%1500, Output: 64 + (i*37)%400}
		o := latency.Observation{
			At: end.Add(-time.Duration(n-i) * 50 * time.Millisecond), Features: f,
			TTFT: truth().PredictTTFT(f).Value, TPOT: truth().PredictTPOT(f).Value,
		}
		st = cfg.Add(st, cfg.Contribution(m, o))
		m = latency.Fit(cfg, st, latency.DefaultPrior(), o.At)
	}
	return st
}

func newPredictedScheduler(t *testing.T, queue bool, specs ...state.WorkerSpec) (*Scheduler, *learningStore, *clock, *recorder) {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	store := &learningStore{Store: memory.New(nil, state.Limits{}), stats: map[string]map[string]latency.Stats{}}
	if err := store.Register(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	opts := Options{Strategy: scoring.Predicted, ReplicaID: "test", Recorder: rec, Now: c.now}
	if queue {
		opts.Queue = QueueOptions{MaxSize: 4, Timeouts: [3]time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second}, PollEvery: time.Hour}
	}
	s, err := New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, store, c, rec
}

func slo(ttft, tpot time.Duration) SLO {
	return SLO{TTFT: NewObjective(ttft, SLOHeader), TPOT: NewObjective(tpot, SLOHeader)}
}

// A claimed request teaches its worker's model: its first token goes to
// the store with its TTFT, its end with its TPOT, both paired with the
// features the claim read; the decision records what was predicted and
// the result how far off it was.
func TestTicketLearnsTTFTAndTPOT(t *testing.T) {
	s, store, c, rec := newPredictedScheduler(t, false, spec("a", "m", 8))
	ctx := context.Background()
	hold, err := s.Admit(ctx, Request{ID: "hold", Model: "m", PromptTokens: 300, MaxTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := s.Admit(ctx, Request{ID: "r", Model: "m", PromptTokens: 1000, MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := latency.Features{Running: 1, DecodeTokens: 500, Uncached: 1000, Output: 100}
	if tk.learn.features != want {
		t.Fatalf("features %+v, want the claim's %+v", tk.learn.features, want)
	}
	p := tk.Decision.Prediction
	if p == nil || !p.TTFTUnknown || p.TTFTSeconds != tk.learn.ttft.Value.Seconds() || p.TPOTSeconds <= 0 {
		t.Fatalf("prediction %+v", p)
	}
	c.add(200 * time.Millisecond)
	tk.FirstToken(200 * time.Millisecond)
	tk.FirstToken(time.Second) // only the first counts
	c.add(time.Second)
	tk.Finish(Outcome{Status: 200, CompletionTokens: 11})
	hold.Finish(Outcome{Status: 200, Aborted: true})
	s.bg.Wait()

	store.mu.Lock()
	firsts, adds := store.firsts, store.adds
	store.mu.Unlock()
	if len(firsts) != 1 || firsts[0] != tk.ID {
		t.Fatalf("first tokens %v, want once for %s", firsts, tk.ID)
	}
	if len(adds) != 2 || adds[0].Worker != "a" || adds[0].Model != "m" {
		t.Fatalf("contributions %+v, want the TTFT and the TPOT of a, m", adds)
	}
	// The two contributions are exactly the observations of 200 ms TTFT
	// and (1.2 s − 200 ms)/10 = 100 ms TPOT with the claim's features.
	cfg := latency.DefaultConfig()
	m := tk.learn.model
	at := time.Unix(1_700_000_000, 0)
	wantTTFT := cfg.Contribution(m, latency.Observation{At: at.Add(200 * time.Millisecond), Features: want, TTFT: 200 * time.Millisecond})
	wantTPOT := cfg.Contribution(m, latency.Observation{At: at.Add(1200 * time.Millisecond), Features: want, TPOT: 100 * time.Millisecond})
	// Learning runs off the request's path: in either order.
	if adds[0].Stats.Epoch.After(adds[1].Stats.Epoch) {
		adds[0], adds[1] = adds[1], adds[0]
	}
	for i, w := range []latency.Stats{wantTTFT, wantTPOT} {
		got := adds[i].Stats
		if !got.Epoch.Equal(w.Epoch) || len(got.Sums) != len(w.Sums) {
			t.Fatalf("contribution %d: epoch %v, %d sums; want %v", i, got.Epoch, len(got.Sums), w.Epoch)
		}
		for k := range w.Sums {
			if math.Abs(got.Sums[k]-w.Sums[k]) > 1e-12*math.Max(1, math.Abs(w.Sums[k])) {
				t.Fatalf("contribution %d sum %d = %v, want %v", i, k, got.Sums[k], w.Sums[k])
			}
		}
	}
	ttft, tpot := s.PredictionErrors()
	if ttft.Count != 1 || tpot.Count != 1 {
		t.Fatalf("error tracker counts %d %d, want 1 and 1 (the aborted request measured nothing)", ttft.Count, tpot.Count)
	}
	res := lastResult(t, rec, "r")
	if res.TPOTSeconds != 0.1 || math.Abs(res.TTFTError-relativeError(tk.learn.ttft.Value, 200*time.Millisecond)) > 1e-12 || res.TPOTError <= 0 {
		t.Fatalf("result %+v", res)
	}
}

func lastResult(t *testing.T, rec *recorder, id string) *Result {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := len(rec.ds) - 1; i >= 0; i-- {
		if d := rec.ds[i]; d.RequestID == id && d.Result != nil {
			return d.Result
		}
	}
	t.Fatalf("no result recorded for %s", id)
	return nil
}

// A request moved by Envoy to another worker teaches neither: its
// features were the first worker's.
func TestMovedRequestTeachesNothing(t *testing.T) {
	s, store, _, _ := newPredictedScheduler(t, false, spec("a", "m", 1), spec("b", "m", 1))
	tk, err := s.Admit(context.Background(), Request{ID: "r", Model: "m", PromptTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	tk.Moved(map[string]string{"a": "b", "b": "a"}[tk.Worker()])
	tk.FirstToken(100 * time.Millisecond)
	tk.Finish(Outcome{Status: 200, TTFT: 100 * time.Millisecond, CompletionTokens: 5})
	s.bg.Wait()
	if len(store.adds) != 0 || len(store.firsts) != 1 {
		t.Fatalf("moved request: %d contributions, %d first tokens; want 0 and 1", len(store.adds), len(store.firsts))
	}
}

// trainedScheduler has workers whose models learned truth, on the real
// clock (the queue's timers are real).
func trainedScheduler(t *testing.T, queue bool, specs ...state.WorkerSpec) (*Scheduler, *learningStore, *recorder) {
	t.Helper()
	s, store, c, rec := newPredictedScheduler(t, queue, specs...)
	c.real = true
	for _, sp := range specs {
		store.stats[sp.ID] = map[string]latency.Stats{"m": trained(400, c.now())}
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, store, rec
}

// The view fits each worker once a snapshot; a worker with no history
// starts from the pooled curves of the model's other workers, unknown.
func TestViewFitsAndPoolsNewcomers(t *testing.T) {
	s, store, _ := trainedScheduler(t, false, spec("a", "m", 4))
	if err := store.Register(context.Background(), []state.WorkerSpec{spec("new", "m", 4)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	known, fresh := s.latencyModel("a", "m"), s.latencyModel("new", "m")
	if known.Unknown() || !fresh.Unknown() {
		t.Fatalf("unknown: trained %v, newcomer %v", known.Unknown(), fresh.Unknown())
	}
	prior := latency.Fit(latency.DefaultConfig(), latency.Stats{}, latency.DefaultPrior(), time.Time{})
	for _, f := range []latency.Features{{Uncached: 1000}, {Running: 10, PrefillTokens: 2000, DecodeTokens: 20000, Uncached: 500, Output: 200}} {
		want := truth().PredictTTFT(f).Value.Seconds()
		for name, m := range map[string]latency.Model{"trained": known, "newcomer": fresh} {
			if got := m.PredictTTFT(f).Value.Seconds(); math.Abs(got-want) > 0.25*want {
				t.Errorf("%s predicts %.3fs at %+v, want the truth's %.3fs within 25%%", name, got, f, want)
			}
		}
		if got := prior.PredictTTFT(f).Value.Seconds(); math.Abs(got-want) < 0.25*want {
			t.Fatalf("the default prior predicts %.3fs, too close to the truth's %.3fs for this test to tell them apart", got, want)
		}
	}
}

// A TTFT objective no worker can meet even idle is refused at once, with
// no claim, its best idle prediction recorded.
func TestObjectiveUnattainableIdle(t *testing.T) {
	s, _, rec := trainedScheduler(t, true, spec("a", "m", 8))
	m := s.latencyModel("a", "m")
	idle := m.PredictTTFT(latency.Features{Uncached: 1000, Output: scoring.DefaultOutputTokens}).Value
	_, err := s.Admit(context.Background(), Request{ID: "never", Model: "m", PromptTokens: 1000, SLO: slo(idle*9/10, 0)})
	if !errors.Is(err, ErrObjectiveUnmet) || RetryAfterOf(err) <= 0 {
		t.Fatalf("unattainable objective: %v", err)
	}
	d := lastDecision(t, rec, "never")
	if d.Outcome != OutcomeObjectiveUnmet || d.Prediction == nil || d.Prediction.TTFTSeconds != idle.Seconds() || d.QueuePosition != 0 {
		t.Fatalf("refusal %s records %+v, want the idle prediction %v and no queueing", d.Outcome, d.Prediction, idle)
	}
	if s.LiveClaims() != 0 || s.Waiting() != 0 {
		t.Fatal("an unattainable request holds a claim or waits")
	}
	// Within reach idle: claimed.
	tk, err := s.Admit(context.Background(), Request{ID: "ok", Model: "m", PromptTokens: 1000, SLO: slo(idle*2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(Outcome{Status: 200})
}

func lastDecision(t *testing.T, rec *recorder, id string) *Decision {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := len(rec.ds) - 1; i >= 0; i-- {
		if rec.ds[i].RequestID == id {
			return rec.ds[i]
		}
	}
	t.Fatalf("no decision recorded for %s", id)
	return nil
}
