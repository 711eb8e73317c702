package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

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

// truth is a worker's true latency: TTFT = 0.05 + 0.3·Q + 0.5·U +
// 0.02·R + 0.007·(Q + U)·R, TPOT = 0.02 + 0.001·R + 0.0005·T (seconds,
// tokens in thousands).
func truth() latency.Model {
	var m latency.Model
	m.TTFT.Coef = [5]float64{0.05, 0.3, 0.5, 0.02, 0.007}
	m.TPOT.Coef = [5]float64{0.02, 0.001, 0.0005}
	return m
}

// trained is the stats of n observations of truth ending at end.
func trained(n int, end time.Time) latency.Stats { return trainedOn(truth(), n, end) }

// trainedOn is the stats of n observations of the worker whose true
// latency is truth, ending at end.
func trainedOn(truth latency.Model, n int, end time.Time) latency.Stats {
	cfg := latency.DefaultConfig()
	var st latency.Stats
	var m latency.Model
	for i := range n {
		f := latency.Features{Running: i % 40, PrefillTokens: (i * 397) % 4000, DecodeTokens: (i * 911) % 30000, Uncached: 100 + (i*131)%1500, Output: 64 + (i*37)%400}
		o := latency.Observation{
			At: end.Add(-time.Duration(n-i) * 50 * time.Millisecond), Features: f,
			TTFT: truth.PredictTTFT(f).Value, TPOT: truth.PredictTPOT(f).Value,
		}
		st = cfg.Add(st, cfg.Contribution(m, o))
		m = latency.Fit(cfg, st, latency.DefaultPrior(), o.At)
	}
	return st
}

func newPredictedScheduler(t *testing.T, queue bool, specs ...state.WorkerSpec) (*Scheduler, *memory.Store, *clock, *recorder) {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	store := memory.New(c.now, state.Limits{})
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
// the store (its prompt stops counting as prefill ahead) with its TTFT,
// its end with its TPOT, both paired with the features the claim read;
// the decision records what was predicted and the result how far off it
// was.
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
	want := latency.Features{Running: 1, PrefillTokens: 300, DecodeTokens: 500, Uncached: 1000, Output: 100}
	if tk.learn.features != want {
		t.Fatalf("features %+v, want the claim's %+v", tk.learn.features, want)
	}
	p := tk.Decision.Prediction
	if p == nil || !p.TTFTUnknown || p.TTFTSeconds != tk.learn.ttft.Value.Seconds() || p.TPOTSeconds <= 0 {
		t.Fatalf("prediction %+v", p)
	}
	if a := aheadOf(t, store, "a"); a != 1300 {
		t.Fatalf("prefill ahead %d, want both prompts' 1300", a)
	}
	c.add(200 * time.Millisecond)
	tk.FirstToken(200 * time.Millisecond)
	tk.FirstToken(time.Second) // only the first counts
	s.bg.Wait()
	if a := aheadOf(t, store, "a"); a != 300 {
		t.Fatalf("prefill ahead %d after the first token, want the other prompt's 300", a)
	}
	c.add(time.Second)
	tk.Finish(Outcome{Status: 200, CompletionTokens: 11})
	hold.Finish(Outcome{Status: 200, Aborted: true})
	s.bg.Wait()

	// The store holds exactly the observations of 200 ms TTFT and (1.2 s
	// − 200 ms)/10 = 100 ms TPOT with the claim's features: the same fit.
	cfg := latency.DefaultConfig()
	m := tk.learn.model
	at := time.Unix(1_700_000_000, 0)
	wantStats := cfg.Add(
		cfg.Contribution(m, latency.Observation{At: at.Add(200 * time.Millisecond), Features: want, TTFT: 200 * time.Millisecond}),
		cfg.Contribution(m, latency.Observation{At: at.Add(1200 * time.Millisecond), Features: want, TPOT: 100 * time.Millisecond}))
	snap, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Workers[0].LatencyStats["m"]
	end := at.Add(2 * time.Second)
	g, w := cfg.Rebase(got, end), cfg.Rebase(wantStats, end)
	if len(g.Sums) != latency.Size {
		t.Fatalf("stored %d sums, want %d", len(g.Sums), latency.Size)
	}
	for k := range w.Sums {
		if math.Abs(g.Sums[k]-w.Sums[k]) > 1e-9*math.Max(1, math.Abs(w.Sums[k])) {
			t.Fatalf("sum %d = %v, want %v", k, g.Sums[k], w.Sums[k])
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

func aheadOf(t *testing.T, store *memory.Store, worker string) int {
	t.Helper()
	return workerState(t, store, worker).AheadTokens
}

// workerState is worker's entry in the store's snapshot.
func workerState(t *testing.T, store *memory.Store, worker string) state.Worker {
	t.Helper()
	snap, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == worker {
			return w
		}
	}
	t.Fatalf("no worker %s", worker)
	return state.Worker{}
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
	s, store, c, _ := newPredictedScheduler(t, false, spec("a", "m", 1), spec("b", "m", 1))
	tk, err := s.Admit(context.Background(), Request{ID: "r", Model: "m", PromptTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	tk.Moved(map[string]string{"a": "b", "b": "a"}[tk.Worker()])
	c.add(100 * time.Millisecond)
	tk.FirstToken(100 * time.Millisecond)
	c.add(time.Second)
	tk.Finish(Outcome{Status: 200, TTFT: 100 * time.Millisecond, CompletionTokens: 5})
	s.bg.Wait()
	snap, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if len(w.LatencyStats) != 0 {
			t.Fatalf("moved request taught %s: %v", w.Spec.ID, w.LatencyStats)
		}
	}
	if ttft, tpot := s.PredictionErrors(); ttft.Count+tpot.Count != 0 {
		t.Fatal("a moved request's errors were recorded")
	}
}

// trainedScheduler has workers whose models learned truth, on the real
// clock (the queue's timers are real).
func trainedScheduler(t *testing.T, queue bool, specs ...state.WorkerSpec) (*Scheduler, *memory.Store, *recorder) {
	t.Helper()
	s, store, c, rec := newPredictedScheduler(t, queue, specs...)
	c.real = true
	var cs []state.LatencyContribution
	for _, sp := range specs {
		cs = append(cs, state.LatencyContribution{Worker: sp.ID, Model: "m", Stats: trained(400, c.now())})
	}
	if err := store.AddLatency(context.Background(), cs); err != nil {
		t.Fatal(err)
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
	known, fresh := s.LatencyModel("a", "m"), s.LatencyModel("new", "m")
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
	m := s.LatencyModel("a", "m")
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

// loads is what the trained worker a is predicted to give a request of
// 1000 prompt tokens idle and beside the hold's 1,000 prompt tokens ahead.
func loads(t *testing.T, s *Scheduler) (m latency.Model, idle, loaded time.Duration) {
	t.Helper()
	m = s.LatencyModel("a", "m")
	idle = m.PredictTTFT(latency.Features{Uncached: 1000, Output: scoring.DefaultOutputTokens}).Value
	loaded = m.PredictTTFT(latency.Features{Running: 1, PrefillTokens: 1000, DecodeTokens: 20000, Uncached: 1000, Output: scoring.DefaultOutputTokens}).Value
	if loaded-idle < 200*time.Millisecond {
		t.Fatalf("the hold adds only %v to the TTFT: too little to tell", loaded-idle)
	}
	return m, idle, loaded
}

// hold claims worker a with a prompt of 1,000 tokens that never has its
// first token (it stays ahead of every later request) and 20,000 decode
// tokens.
func hold(t *testing.T, s *Scheduler) *Ticket {
	t.Helper()
	tk, err := s.Admit(context.Background(), Request{ID: "hold", Model: "m", PromptTokens: 1000, MaxTokens: 20000})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// With no worker within its TTFT objective at the live load, a request
// waits, and is refused with ErrObjectiveUnmet once its objective less
// the best idle prediction has passed; a looser objective is met, the
// claim recording its prediction and ceiling.
func TestObjectiveWaitAndShed(t *testing.T) {
	s, _, rec := trainedScheduler(t, true, spec("a", "m", 8))
	ctx := context.Background()
	m, idle, loaded := loads(t, s)
	h := hold(t, s)
	defer h.Finish(Outcome{Status: 200})
	var maxWait time.Duration
	obj := idle + 80*time.Millisecond
	_, err := s.Admit(ctx, Request{ID: "late", Model: "m", PromptTokens: 1000, SLO: slo(obj, 0), OnQueued: func(d time.Duration) { maxWait = d }})
	if !errors.Is(err, ErrObjectiveUnmet) || RetryAfterOf(err) <= 0 {
		t.Fatalf("over its objective: %v", err)
	}
	d := lastDecision(t, rec, "late")
	if d.Outcome != OutcomeObjectiveUnmet || d.QueuePosition != 1 || maxWait > 80*time.Millisecond || maxWait <= 0 || d.WaitSeconds < maxWait.Seconds() || d.WaitSeconds > 1 {
		t.Fatalf("decision %s, position %d, waited %vs, told %v: want a wait of about 80ms", d.Outcome, d.QueuePosition, d.WaitSeconds, maxWait)
	}
	loose := loaded + 200*time.Millisecond
	tk, err := s.Admit(ctx, Request{ID: "ok", Model: "m", PromptTokens: 1000, SLO: slo(loose, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Finish(Outcome{Status: 200})
	p := tk.Decision.Prediction
	if p.TTFTSeconds != loaded.Seconds() || p.TTFTUnknown || math.Abs(p.CeilingSeconds-(loose.Seconds()-m.TTFT.Coef[0])) > 1e-9 {
		t.Fatalf("prediction %+v, want ttft %v, ceiling %v", p, loaded, loose.Seconds()-m.TTFT.Coef[0])
	}
}

// A request waiting for its objective takes the worker that frees in
// time (late binding).
func TestObjectiveWaiterGranted(t *testing.T) {
	s, _, rec := trainedScheduler(t, true, spec("a", "m", 8))
	_, idle, loaded := loads(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.store.Subscribe(ctx, "test", s.onNotice); err != nil {
		t.Fatal(err)
	}
	h := hold(t, s)
	queued := make(chan time.Duration, 1)
	got := make(chan error, 1)
	go func() {
		tk, err := s.Admit(ctx, Request{
			ID: "waits", Model: "m", PromptTokens: 1000, SLO: slo((idle+loaded)/2, 0),
			OnQueued: func(d time.Duration) { queued <- d },
		})
		if err == nil {
			tk.Finish(Outcome{Status: 200})
		}
		got <- err
	}()
	select {
	case <-queued:
	case err := <-got:
		t.Fatalf("not queued: %v", err)
	}
	h.Finish(Outcome{Status: 200}) // the release hands the slot to the waiter
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if d := lastDecision(t, rec, "waits"); d.Outcome != OutcomeClaimed || d.QueuePosition != 1 || d.Worker != "a" || d.Prediction == nil {
		t.Fatalf("waiter's decision %s on %q at %d, prediction %+v", d.Outcome, d.Worker, d.QueuePosition, d.Prediction)
	}
}

// With queueing off, a request no worker can take within its objectives
// is refused with ErrObjectiveUnmet rather than at_capacity: over its TTFT
// objective at the live load, or over its TPOT objective at any load.
func TestObjectiveRefusedWithoutQueue(t *testing.T) {
	s, _, rec := trainedScheduler(t, false, spec("a", "m", 8))
	ctx := context.Background()
	m, idle, loaded := loads(t, s)
	h := hold(t, s)
	defer h.Finish(Outcome{Status: 200})
	if _, err := s.Admit(ctx, Request{ID: "ttft", Model: "m", PromptTokens: 1000, SLO: slo((idle+loaded)/2, 0)}); !errors.Is(err, ErrObjectiveUnmet) {
		t.Fatalf("over its TTFT objective: %v", err)
	}
	tpot := m.PredictTPOT(latency.Features{Uncached: 1000, Output: scoring.DefaultOutputTokens}).Value
	if _, err := s.Admit(ctx, Request{ID: "tpot", Model: "m", PromptTokens: 1000, SLO: slo(10*time.Second, tpot*99/100)}); !errors.Is(err, ErrObjectiveUnmet) {
		t.Fatalf("over its TPOT objective: %v", err)
	}
	if d := lastDecision(t, rec, "tpot"); d.Outcome != OutcomeObjectiveUnmet || len(d.Candidates) != 1 {
		t.Fatalf("decision %s with %d candidates", d.Outcome, len(d.Candidates))
	}
	tk, err := s.Admit(ctx, Request{ID: "ok", Model: "m", PromptTokens: 1000, SLO: slo(10*time.Second, 10*tpot)})
	if err != nil {
		t.Fatalf("within its objectives: %v", err)
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

// With InlineLearning the first token reaches the store before
// FirstToken returns, and the finish's observation before Finish
// returns: no goroutine is left to read the caller's clock later.
func TestInlineLearningIsSynchronous(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	store := memory.New(c.now, state.Limits{})
	if err := store.Register(context.Background(), []state.WorkerSpec{spec("a", "m", 8)}); err != nil {
		t.Fatal(err)
	}
	s, err := New(store, Options{Strategy: scoring.Predicted, ReplicaID: "test", Now: c.now, InlineLearning: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tk, err := s.Admit(context.Background(), Request{ID: "r", Model: "m", PromptTokens: 1000, MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	c.add(200 * time.Millisecond)
	tk.FirstToken(200 * time.Millisecond)
	if a := aheadOf(t, store, "a"); a != 0 {
		t.Fatalf("prefill ahead %d right after FirstToken, want 0", a)
	}
	c.add(time.Second)
	tk.Finish(Outcome{Status: 200, CompletionTokens: 11})
	snap, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st := snap.Workers[0].LatencyStats["m"]; len(st.Sums) != latency.Size {
		t.Fatalf("stats right after Finish hold %d sums, want %d", len(st.Sums), latency.Size)
	}
}

// A worker with a few observations, too few to be known, is predicted
// from the fleet's curves, not the generic prior's slow GPU: otherwise,
// in a fleet faster than that GPU, the strategy predicted would rank it
// below every known worker and never send it the requests it needs to be
// learned.
func TestFewObservationsDoNotStarveAWorker(t *testing.T) {
	ctx := context.Background()
	fast := truth() // a tenth of truth's latency: faster than the prior
	for i := range fast.TTFT.Coef {
		fast.TTFT.Coef[i] /= 10
		fast.TPOT.Coef[i] /= 10
	}
	s, store, c, _ := newPredictedScheduler(t, false, spec("a", "m", 0), spec("few", "m", 0))
	c.real = true
	if err := store.AddLatency(ctx, []state.LatencyContribution{
		{Worker: "a", Model: "m", Stats: trainedOn(fast, 400, c.now())},
		{Worker: "few", Model: "m", Stats: trainedOn(fast, 3, c.now())},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	few := s.LatencyModel("few", "m")
	if !few.Unknown() {
		t.Fatal("a worker with 3 observations is known")
	}
	f := latency.Features{Uncached: 1000, Output: 200}
	generic := latency.Fit(latency.DefaultConfig(), latency.Stats{}, latency.DefaultPrior(), time.Time{}).PredictTTFT(f).Value.Seconds()
	want := fast.PredictTTFT(f).Value.Seconds()
	got := few.PredictTTFT(f).Value.Seconds()
	t.Logf("TTFT at %+v: %.3fs predicted with 3 observations, truth %.3fs, generic prior %.3fs", f, got, want, generic)
	if math.Abs(got-want) > 0.5*want {
		t.Fatalf("the worker with few observations predicts %.3fs, want the fleet's %.3fs within 50%% (generic prior: %.3fs)", got, want, generic)
	}
	// Under load the newcomer gets its share.
	served := map[string]int{}
	var held []*Ticket
	for i := range 20 {
		tk, err := s.Admit(ctx, Request{ID: fmt.Sprintf("r%d", i), Model: "m", PromptTokens: 1000, MaxTokens: 200})
		if err != nil {
			t.Fatal(err)
		}
		served[tk.Worker()]++
		held = append(held, tk)
	}
	for _, tk := range held {
		tk.Finish(Outcome{Status: 200})
	}
	t.Logf("20 requests in flight: %v", served)
	if served["few"] < 5 {
		t.Fatalf("served %v: the worker with few observations is starved", served)
	}
}
