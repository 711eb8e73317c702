package scoring

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func params() Params {
	return Params{
		Weights:      Weights{Active: 100, Terms: DefaultTermWeights()},
		JobCostScale: 10 * time.Second,
		MinSamples:   3,
		Staleness:    60 * time.Second,
		LoadPenalty:  0.1,
	}
}

func worker(id string, mut ...func(*Worker)) Worker {
	w := Worker{ID: id, Models: []string{"m"}, Health: Healthy, MaxConcurrency: 4}
	for _, f := range mut {
		f(&w)
	}
	return w
}

func avg(v float64, n int64) Average { return Average{Value: v, Samples: n, Age: time.Second} }

// pick runs a strategy end to end the way the store does.
func pick(t *testing.T, name string, in Input, active []int) (Plan, string) {
	t.Helper()
	s, err := New(name, params())
	if err != nil {
		t.Fatal(err)
	}
	plan := Build(s, in)
	if active == nil {
		active = make([]int, len(plan.Candidates))
	}
	i := Pick(plan.Candidates, active, nil)
	if i < 0 {
		return plan, ""
	}
	return plan, plan.Candidates[i].Worker
}

func TestFilter(t *testing.T) {
	ws := []Worker{
		worker("a"),
		worker("b", func(w *Worker) { w.Draining = true }),
		worker("c", func(w *Worker) { w.Health = Unhealthy }),
		worker("d", func(w *Worker) { w.Models = []string{"other"} }),
		worker("e", func(w *Worker) { w.Health = Recovering }),
	}
	el, ex := Filter(Job{Model: "m"}, ws)
	// A recovering worker stays eligible: the store gives it one probe
	// request at a time.
	if len(el) != 2 || el[0].ID != "a" || el[1].ID != "e" {
		t.Fatalf("eligible = %+v, want a and e", el)
	}
	want := map[string]string{"b": "draining", "c": "unhealthy"}
	if len(ex) != len(want) {
		t.Fatalf("excluded = %+v", ex)
	}
	for _, e := range ex {
		if want[e.Worker] != e.Reason {
			t.Errorf("excluded %s for %q, want %q", e.Worker, e.Reason, want[e.Worker])
		}
	}
}

func TestStrategies(t *testing.T) {
	slowFast := []Worker{
		worker("slow", func(w *Worker) {
			w.Latency, w.TTFT, w.TokensPerSec = avg(8, 10), avg(2, 10), avg(10, 10)
		}),
		worker("fast", func(w *Worker) {
			w.Latency, w.TTFT, w.TokensPerSec = avg(1, 10), avg(0.1, 10), avg(100, 10)
		}),
	}
	tests := []struct {
		name     string
		strategy string
		workers  []Worker
		active   []int
		want     string
	}{
		{"least_loaded picks fewest in flight", LeastLoaded, []Worker{worker("a"), worker("b")}, []int{3, 1}, "b"},
		{"least_loaded skips a worker at its cap", LeastLoaded, []Worker{worker("a"), worker("b", func(w *Worker) { w.MaxConcurrency = 1 })}, []int{2, 1}, "a"},
		{"latency_based picks lowest average", LatencyBased, slowFast, nil, "fast"},
		{"inference_aware picks lowest estimate", InferenceAware, slowFast, nil, "fast"},
		{"inference_aware load penalty can flip it", InferenceAware, slowFast, []int{0, 3}, "fast"},
		{"scored prefers the idle worker", Scored, []Worker{worker("a"), worker("b")}, []int{1, 0}, "b"},
		{"scored prefers fast at equal load", Scored, slowFast, []int{0, 0}, "fast"},
		{"scored: one more request outweighs every normalised term", Scored, slowFast, []int{0, 1}, "slow"},
		{"scored: kv pressure", Scored, []Worker{worker("a", func(w *Worker) { w.KVPressure = Known(0.9) }), worker("b", func(w *Worker) { w.KVPressure = Known(0.1) })}, nil, "b"},
		{"scored: gpu util", Scored, []Worker{worker("a", func(w *Worker) { w.GPUUtil = Known(0.2) }), worker("b", func(w *Worker) { w.GPUUtil = Known(0.95) })}, nil, "a"},
		{"scored: worker queue", Scored, []Worker{worker("a", func(w *Worker) { w.Queue = Known(2) }), worker("b")}, nil, "b"},
		{"scored: distance", Scored, []Worker{worker("a", func(w *Worker) { w.Distance = 1 }), worker("b")}, nil, "b"},
		{"none eligible", Scored, []Worker{worker("a", func(w *Worker) { w.Health = Unhealthy })}, nil, ""},
		{"all full", LeastLoaded, []Worker{worker("a", func(w *Worker) { w.MaxConcurrency = 1 })}, []int{1}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := pick(t, tc.strategy, Input{Job: Job{Model: "m", MaxTokens: 100}, Workers: tc.workers}, tc.active)
			if got != tc.want {
				t.Fatalf("picked %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInferenceAwareFormula(t *testing.T) {
	w := worker("a", func(w *Worker) { w.TTFT, w.TokensPerSec = avg(0.5, 5), avg(20, 5) })
	s, _ := New(InferenceAware, params())
	plan := Build(s, Input{Job: Job{Model: "m", MaxTokens: 200}, Workers: []Worker{w}})
	// estimated = 0.5 + (200*0.5)/20 = 5.5; at 2 active: 5.5*(1+0.2) = 6.6
	if got := plan.Candidates[0].Curve.At(2); math.Abs(got-6.6) > 1e-9 {
		t.Fatalf("score at 2 active = %v, want 6.6", got)
	}
}

func TestInferenceAwareNoDataAndFallback(t *testing.T) {
	few := worker("few", func(w *Worker) { w.TTFT, w.TokensPerSec = avg(0.1, 2), avg(50, 2) })
	stale := worker("stale", func(w *Worker) {
		w.TTFT, w.TokensPerSec = avg(0.1, 9), avg(50, 9)
		w.TTFT.Age, w.TokensPerSec.Age = time.Hour, time.Hour
	})
	good := worker("good", func(w *Worker) { w.TTFT, w.TokensPerSec = avg(3, 9), avg(5, 9) })
	s, _ := New(InferenceAware, params())

	plan := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{few, stale, good}})
	if plan.Fallback != "" {
		t.Fatalf("fell back with one worker having data")
	}
	for _, c := range plan.Candidates {
		if inf := IsInfinite(c.Curve.Base); inf != (c.Worker != "good") {
			t.Errorf("%s: infinite=%v", c.Worker, inf)
		}
	}
	if i := Pick(plan.Candidates, []int{0, 0, 3}, nil); plan.Candidates[i].Worker != "good" {
		t.Fatalf("a worker with data must beat workers without, even loaded")
	}

	plan = Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{few, stale}})
	if plan.Fallback != LeastLoaded {
		t.Fatalf("fallback = %q, want least_loaded", plan.Fallback)
	}
	if i := Pick(plan.Candidates, []int{2, 0}, nil); plan.Candidates[i].Worker != "stale" {
		t.Fatalf("fallback must behave as least_loaded")
	}
}

func TestRoundRobinRotates(t *testing.T) {
	ws := []Worker{worker("c"), worker("a"), worker("b")}
	s, _ := New(RoundRobin, params())
	var got []string
	for cur := uint64(0); cur < 6; cur++ {
		plan := Build(s, Input{Job: Job{Model: "m"}, Workers: ws, Cursor: cur})
		got = append(got, plan.Candidates[Pick(plan.Candidates, make([]int, 3), nil)].Worker)
	}
	want := []string{"a", "b", "c", "a", "b", "c"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rotation = %v, want %v", got, want)
		}
	}
	// A full worker is skipped to the next in rotation.
	plan := Build(s, Input{Job: Job{Model: "m"}, Workers: ws, Cursor: 0})
	active := make([]int, 3)
	for i, c := range plan.Candidates {
		if c.Worker == "a" {
			active[i] = 4
		}
	}
	if w := plan.Candidates[Pick(plan.Candidates, active, nil)].Worker; w != "b" {
		t.Fatalf("with a full, picked %s, want b", w)
	}
}

func TestScoredTermsAreNormalised(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s, _ := New(Scored, params())
	for trial := 0; trial < 500; trial++ {
		var ws []Worker
		for i := 0; i < 1+r.IntN(8); i++ {
			ws = append(ws, worker(string(rune('a'+i)), func(w *Worker) {
				w.Latency = avg(r.Float64()*30, int64(r.IntN(3)))
				w.TTFT = avg(r.Float64()*3, int64(r.IntN(3)))
				w.TokensPerSec = avg(r.Float64()*200, int64(r.IntN(3)))
			}))
		}
		plan := Build(s, Input{Job: Job{Model: "m", MaxTokens: r.IntN(4000)}, Workers: ws})
		for _, c := range plan.Candidates {
			for _, term := range c.Terms {
				switch term.Name {
				case "norm_latency", "norm_throughput", "norm_job_cost":
					if term.Value < 0 || term.Value > 1 {
						t.Fatalf("%s = %v out of [0,1]", term.Name, term.Value)
					}
				}
			}
		}
	}
}

func TestUnknownTermsAreFlagged(t *testing.T) {
	s, _ := New(Scored, params())
	stale := worker("a", func(w *Worker) { w.Latency = Average{Value: 3, Samples: 9, Age: time.Hour} })
	plan := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{stale}})
	unknown := map[string]bool{}
	for _, tm := range plan.Candidates[0].Terms {
		unknown[tm.Name] = tm.Unknown
	}
	for _, name := range []string{"queue", "norm_latency", "norm_job_cost", "norm_throughput", "kv_pressure", "gpu_util"} {
		if !unknown[name] {
			t.Errorf("%s should be unknown", name)
		}
	}
	if unknown["node_distance"] {
		t.Errorf("node_distance is always known")
	}
}

func TestPickTiesGoToLowerIndex(t *testing.T) {
	cands := []Candidate{{Worker: "x", Cap: 1}, {Worker: "y", Cap: 1}}
	if i := Pick(cands, []int{0, 0}, nil); i != 0 {
		t.Fatalf("tie went to %d", i)
	}
	if i := Pick(cands, []int{0, 0}, []bool{false, true}); i != 1 {
		t.Fatalf("unavailable candidate picked")
	}
}

func TestBreakdownTotalsMatchCurves(t *testing.T) {
	s, _ := New(Scored, params())
	ws := []Worker{worker("a", func(w *Worker) { w.KVPressure = Known(0.5) }), worker("b")}
	plan := Build(s, Input{Job: Job{Model: "m"}, Workers: ws})
	bd := Breakdown(plan.Candidates, []int{2, 4})
	for i, b := range bd {
		sum := b.ActiveWeight * float64(b.Active)
		for _, tm := range b.Terms {
			sum += tm.Contribution()
		}
		if math.Abs(sum-b.Total) > 1e-9 {
			t.Fatalf("%s: terms sum to %v, total %v", b.Worker, sum, b.Total)
		}
		if b.Active != []int{2, 4}[i] {
			t.Fatalf("active not carried")
		}
	}
	if !bd[1].Full {
		t.Fatalf("b at its cap should be marked full")
	}
}

func BenchmarkScoredPlan64(b *testing.B) {
	s, _ := New(Scored, params())
	var ws []Worker
	for i := 0; i < 64; i++ {
		ws = append(ws, worker(string(rune('A'+i)), func(w *Worker) {
			w.Latency, w.TTFT, w.TokensPerSec = avg(float64(i), 5), avg(0.1, 5), avg(50, 5)
		}))
	}
	in := Input{Job: Job{Model: "m", MaxTokens: 256}, Workers: ws}
	active := make([]int, 64)
	b.ReportAllocs()
	for b.Loop() {
		plan := Build(s, in)
		Pick(plan.Candidates, active, nil)
	}
}

// A Cap of 0 is no configured ceiling: never full.
func TestPickNoCap(t *testing.T) {
	cands := []Candidate{{Worker: "x", Cap: 2, Curve: Curve{Slope: 1}}, {Worker: "y", Curve: Curve{Base: 50, Slope: 1}}}
	if i := Pick(cands, []int{2, 1000}, nil); i != 1 {
		t.Fatalf("picked %d, want the worker with no cap", i)
	}
	if i := PickLive(cands, Prompt{}, []int{2, 1000}, nil, nil); i != 1 {
		t.Fatalf("PickLive picked %d, want the worker with no cap", i)
	}
	bd := Breakdown(cands, []int{2, 1000})
	if !bd[0].Full || bd[1].Full {
		t.Fatalf("full flags %v %v, want true false", bd[0].Full, bd[1].Full)
	}
}
