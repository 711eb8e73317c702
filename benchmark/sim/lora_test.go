package sim

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// smallLoRAStudy is 3 A100s with 2 LoRA slots each, 8 adapters, short
// requests.
func smallLoRAStudy() Study {
	s := DefaultStudy()
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 3}}
	s.Engine.MaxLoras = 2
	s.Workload = Workload{Kind: KindLoRA, Requests: 300, LoRA: LoRAWorkload{Adapters: 8, ZipfS: 1, PromptLen: 200, OutputLen: 20}}
	s.QPS = []float64{20}
	s.Strategies = []string{"predicted", emulate.LoRAQueueKVMaxScore, emulate.LeastRequestP2C}
	s.Seeds = []uint64{1, 2}
	return s
}

func runLoRA(t *testing.T, s Study, strategy string, seed uint64) *RunResult {
	t.Helper()
	src, err := s.Workload.load()
	if err != nil {
		t.Fatal(err)
	}
	run := Run{
		GPUs: s.GPUs, Engine: s.Engine, Replicas: 2, Strategy: strategy, QPS: s.QPS[0], Seed: seed,
		Router: s.Router, Adapters: s.Workload.LoRA.AdapterNames(),
	}
	res, err := simulate(run, src.requests(run.QPS, seed))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoRAWorkloadFollowsZipf(t *testing.T) {
	w := LoRAWorkload{Adapters: 10, ZipfS: 1, PromptLen: 100, OutputLen: 10}
	reqs := loraRequests(w, 20000, 100, rand.New(rand.NewPCG(1, 2)))
	count := map[string]int{}
	for _, q := range reqs {
		count[q.Adapter]++
		if q.Prompt < 50 || q.Prompt > 150 || q.Output < 5 || q.Output > 15 || q.MaxTokens != q.Output {
			t.Fatalf("shape out of range: %+v", q)
		}
	}
	names := w.AdapterNames()
	// P(rank 1) / P(rank 2) = 2 and / P(rank 10) = 10 at s = 1.
	r12 := float64(count[names[0]]) / float64(count[names[1]])
	r110 := float64(count[names[0]]) / float64(count[names[9]])
	if r12 < 1.8 || r12 > 2.2 || r110 < 8 || r110 > 12 {
		t.Errorf("rank 1 / rank 2 = %.2f (want 2), / rank 10 = %.2f (want 10); counts %v", r12, r110, count)
	}

	// Shifting: after one rotation by 3, adapter 3 is the most popular.
	w.ShiftEvery, w.ShiftBy = 10*time.Second, 3
	reqs = loraRequests(w, 20000, 1000, rand.New(rand.NewPCG(1, 2))) // 20 s
	first, second := map[string]int{}, map[string]int{}
	for _, q := range reqs {
		if q.Arrival < 10*time.Second {
			first[q.Adapter]++
		} else {
			second[q.Adapter]++
		}
	}
	if top(first) != names[0] || top(second) != names[3] {
		t.Errorf("most popular before the shift %s (want %s), after %s (want %s)", top(first), names[0], top(second), names[3])
	}
}

func top(m map[string]int) string {
	best, n := "", -1
	for k, v := range m {
		if v > n {
			best, n = k, v
		}
	}
	return best
}

func TestLoRAStudyValidation(t *testing.T) {
	for _, tt := range []struct {
		mut  func(*Study)
		want string
	}{
		{func(s *Study) { s.Engine.MaxLoras = 0 }, "engine.max_loras"},
		{func(s *Study) { s.Engine.MaxLoras = -2 }, "engine.max_loras: must be >= 0"},
		{func(s *Study) { s.Engine.LoRALoadMs = -1 }, "engine.lora_load_ms"},
		{func(s *Study) { s.Workload.LoRA.Adapters = 0 }, "workload.lora.adapters"},
		{func(s *Study) { s.Workload.LoRA.ZipfS = -1 }, "workload.lora.zipf_s"},
		{func(s *Study) { s.Workload.LoRA.ShiftEvery = -time.Second }, "workload.lora.shift_every"},
		{func(s *Study) { s.Workload.LoRA.ShiftBy = 8 }, "workload.lora.shift_by"},
		{func(s *Study) { s.Workload.LoRA.PromptLen = 0 }, "workload.lora.prompt_len"},
		{func(s *Study) { s.Workload.LoRA.OutputLen = 0 }, "workload.lora.output_len"},
		{func(s *Study) { s.Workload.Trace = "x.csv" }, "workload.trace"},
	} {
		s := smallLoRAStudy()
		tt.mut(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error naming %s", err, tt.want)
		}
	}
	if err := smallLoRAStudy().Validate(); err != nil {
		t.Errorf("valid study refused: %v", err)
	}
}

// Every strategy serves every request of a LoRA workload on engines with
// fewer slots than adapters, loads adapters, and repeats itself for a
// seed; the GIE emulation sees every GPU's LoRA figures.
func TestLoRARuns(t *testing.T) {
	s := smallLoRAStudy()
	for _, strategy := range s.Strategies {
		a := runLoRA(t, s, strategy, 3)
		if a.MissingAdapter != 0 || a.LoRALoads == 0 {
			t.Errorf("%s: %d missing adapter, %d loads", strategy, a.MissingAdapter, a.LoRALoads)
		}
		for _, q := range a.Requests {
			if q.Outcome != OutcomeOK {
				t.Fatalf("%s: request %+v not served", strategy, q)
			}
		}
		if b := runLoRA(t, s, strategy, 3); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs of one seed differ", strategy)
		}
	}
}

func TestLoRAEmulationIsFedByScrapes(t *testing.T) {
	f := &loraFeed{}
	loraBuild.mu.Lock()
	loraBuild.feed.Store(f)
	st, err := scoring.New(emulate.LoRAQueueKVMaxScore, scoring.Params{})
	loraBuild.feed.Store(nil)
	loraBuild.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.replicas) != 1 || scoring.Strategy(f.replicas[0]) != st {
		t.Fatalf("the instance built did not join the feed: %d instances", len(f.replicas))
	}
	f.observe("gpu-0", &gpusim.LoRAState{MaxLoras: 2, Running: []string{"a"}})
	ws := []scoring.Worker{
		{ID: "gpu-0", Models: []string{"m"}, Adapters: []string{"a"}, Health: scoring.Healthy, Queue: scoring.Known(0), KVPressure: scoring.Known(0)},
		{ID: "gpu-1", Models: []string{"m"}, Adapters: []string{"a"}, Health: scoring.Healthy, Queue: scoring.Known(0), KVPressure: scoring.Known(0)},
	}
	plan := scoring.Build(st, scoring.Input{Job: scoring.Job{Model: "m", Adapter: "a"}, Workers: ws})
	if i := scoring.Pick(plan.Candidates, []int{0, 0}, nil); plan.Candidates[i].Worker != "gpu-0" {
		t.Errorf("picked %s, not the GPU running the adapter", plan.Candidates[i].Worker)
	}
}

func TestLoRAStudyReportsAims(t *testing.T) {
	s := smallLoRAStudy()
	rep, err := Execute(s, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Aims) != 3 {
		t.Fatalf("%d aims, want 3: %+v", len(rep.Aims), rep.Aims)
	}
	for _, a := range rep.Aims {
		switch a.Verdict {
		case stats.Met, stats.Missed, stats.NotSettled:
		default:
			t.Errorf("aim %q: verdict %q", a.Name, a.Verdict)
		}
	}
	var b bytes.Buffer
	rep.WriteMarkdown(&b)
	for _, want := range []string{"loads / 1,000 req", "| " + emulate.LeastRequestP2C + " |", "Aims of the router's default strategy", "adapter loads per 1,000 requests"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	for _, m := range rep.Summaries {
		if m.LoRA == nil || len(m.LoRA.LoadsPer1000.Rounds) != 2 {
			t.Errorf("%s: lora figures %+v", m.Strategy, m.LoRA)
		}
	}
}

func TestLoadsRatioPairsSeeds(t *testing.T) {
	a := []loraSeed{{10, 100}, {30, 100}, {20, 100}}
	b := []loraSeed{{20, 100}, {60, 100}, {40, 100}}
	e := loadsRatio(a, b, 1)
	if e.Value != 0.5 || e.Lo != 0.5 || e.Hi != 0.5 {
		t.Errorf("a constant per-seed ratio of 0.5 gave %+v", e)
	}
	c := []loraSeed{{20, 100}, {30, 100}, {10, 100}}
	if e := loadsRatio(c, b, 1); !(e.Lo < e.Value && e.Value < e.Hi) {
		t.Errorf("varying ratios gave a degenerate interval %+v", e)
	}
}
