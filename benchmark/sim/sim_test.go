package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// smallStudy is a fleet and workload small enough for -race: 4 A100s,
// 12 groups of 4 prompts of 1,000 + 200 tokens and 40 output tokens.
func smallStudy() Study {
	s := DefaultStudy()
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 3}, {Profile: "h100-llama2-7b", Count: 1}}
	s.Workload.SharedPrefix = SharedPrefix{NumGroups: 12, NumPromptsPerGroup: 4, SystemPromptLen: 1000, QuestionLen: 200, OutputLen: 40}
	s.QPS = []float64{20}
	return s
}

func runOnce(t *testing.T, s Study, strategy string, replicas int, seed uint64) *RunResult {
	t.Helper()
	src, err := s.Workload.load()
	if err != nil {
		t.Fatal(err)
	}
	run := Run{GPUs: s.GPUs, Engine: s.Engine, Replicas: replicas, Strategy: strategy, QPS: s.QPS[0], Seed: seed, Router: s.Router}
	res, err := simulate(run, src.requests(run.QPS, seed))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The same seed gives the same run, request by request, for the product's
// strategies (predicted with its latency models and learned limits) and
// for an emulation with per-replica state, with several replicas; another
// seed gives another run.
func TestDeterministicForASeed(t *testing.T) {
	s := smallStudy()
	for _, strategy := range []string{"scored", "predicted", emulate.PrefixOverlapMinCost, emulate.LeastRequestP2C} {
		a, b := runOnce(t, s, strategy, 2, 7), runOnce(t, s, strategy, 2, 7)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs of seed 7 differ:\n%+v\n%+v", strategy, a, b)
		}
		if a.PrefixHits == 0 {
			t.Errorf("%s: no prefix hit on a shared-prefix workload", strategy)
		}
		if c := runOnce(t, s, strategy, 2, 8); reflect.DeepEqual(a.Requests, c.Requests) {
			t.Errorf("%s: seeds 7 and 8 gave the same requests", strategy)
		}
	}
}

// A study's report is the same whether its runs go one at a time or
// several at once (but for the wall times): runs share nothing, and
// results are kept in the study's order.
func TestExecuteSameForAnyJobs(t *testing.T) {
	s := smallStudy()
	s.Strategies = []string{"round_robin", "predicted", emulate.PrefixAffinityTokenLoad}
	s.Replicas = []int{1, 2}
	s.QPS = []float64{10, 20}
	s.Seeds = []uint64{1, 2, 3}
	one, err := Execute(s, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	many, err := Execute(s, 4, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(progress.String(), "\n"), 2*3*2*3; got != want {
		t.Errorf("%d progress lines, want one a run (%d)", got, want)
	}
	if one.Jobs != 1 || many.Jobs != 4 {
		t.Errorf("jobs %d and %d, want 1 and 4", one.Jobs, many.Jobs)
	}
	for _, r := range []*Report{one, many} {
		r.Wall, r.Jobs = 0, 0
		for i := range r.Summaries {
			r.Summaries[i].Wall = 0
		}
	}
	if !reflect.DeepEqual(one, many) {
		t.Fatal("1 job and 4 jobs gave different reports")
	}
	if len(one.Summaries) != 2*3*2 {
		t.Fatalf("%d summaries, want 12", len(one.Summaries))
	}
	k := 0
	for _, qps := range s.QPS {
		for _, strategy := range s.Strategies {
			for _, n := range s.Replicas {
				got := one.Summaries[k]
				if got.QPS != qps || got.Strategy != strategy || got.Replicas != n || !reflect.DeepEqual(got.Seeds, s.Seeds) {
					t.Errorf("summary %d is %s/%d/%g seeds %v, want %s/%d/%g seeds %v", k, got.Strategy, got.Replicas, got.QPS, got.Seeds, strategy, n, qps, s.Seeds)
				}
				k++
			}
		}
	}
}

// One A100 (a100-llama3-8b), two 16-token prompts without shared blocks,
// timed by hand from the profile's step model:
//
//	step = 3 ms + 40 µs·seqs + linear(tokens) + context·128 KiB / 2e12 B/s
//	linear(16) = 10.142 ms, linear(32) = 10.917 ms (step-times.csv)
//
// A (2 output tokens) arrives at 0 and prefills alone: 1 seq, 16 tokens,
// 16 context: 3.04 ms + 10.142 ms + 1.048 µs = 13.183048 ms, A's first
// token. B (1 token) arrived at 5 ms, during that pass, and waits for its
// end. Pass 2: A's decode (1 token, 17 context) and B's prefill (16
// tokens): 2 seqs, 17 tokens, 33 context: 3.08 ms +
// (10.142 + 0.775/16) ms + 2.162 µs = 13.272599 ms, ending at
// 26.455647 ms with A's last token and B's only one.
func TestHandComputedOneGPU(t *testing.T) {
	run := Run{
		GPUs: []GPUClass{{Profile: "a100-llama3-8b", Count: 1}}, Engine: DefaultStudy().Engine,
		Replicas: 1, Strategy: "round_robin", QPS: 1, Seed: 1, Router: DefaultStudy().Router,
	}
	reqs := []Request{
		{Arrival: 0, Prompt: 16, Output: 2, MaxTokens: 2},
		{Arrival: 5 * time.Millisecond, Prompt: 16, Output: 1, MaxTokens: 1},
	}
	res, err := simulate(run, reqs)
	if err != nil {
		t.Fatal(err)
	}
	const pass1, pass2 = 13_183_048 * time.Nanosecond, 13_272_599 * time.Nanosecond
	want := []struct{ first, done time.Duration }{{pass1, pass1 + pass2}, {pass1 + pass2, pass1 + pass2}}
	// Float-to-duration truncation in the profile may shift a pass by a
	// nanosecond.
	near := func(a, b time.Duration) bool { return a-b <= 2 && b-a <= 2 }
	for i, w := range want {
		r := res.Requests[i]
		if r.Outcome != OutcomeOK || !near(r.FirstToken, w.first) || !near(r.Done, w.done) {
			t.Errorf("request %d: %+v, want first token at %v and done at %v", i, r, w.first, w.done)
		}
	}
	if got := res.Requests[1].TTFT(); !near(got, pass1+pass2-5*time.Millisecond) {
		t.Errorf("B's TTFT %v, want 21.455647ms", got)
	}
}

// A one-GPU fleet is gpusim's offline replay: whatever the router does, it
// has one place to send each request, so every request's times equal
// Simulate's on the same requests.
func TestOneGPUFleetMatchesSimulate(t *testing.T) {
	s := smallStudy()
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 1}}
	s.QPS = []float64{6}
	res := runOnce(t, s, "scored", 1, 3)
	src, _ := s.Workload.load()
	reqs := src.requests(6, 3)
	sreqs := make([]gpusim.SimRequest, len(reqs))
	for i, q := range reqs {
		sreqs[i] = gpusim.SimRequest{Arrival: q.Arrival, PromptTokens: q.Prompt, OutputTokens: q.Output, Blocks: q.Blocks}
	}
	cfg := gpusim.DefaultConfig()
	cfg.Models, cfg.Profile = []string{"llama"}, "a100-llama3-8b"
	want, st, err := gpusim.Simulate(cfg, sreqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		g := res.Requests[i]
		if g.FirstToken != w.FirstToken || g.Done != w.Done || g.Cached != w.CachedTokens || g.Tokens != w.Tokens {
			t.Fatalf("request %d: fleet %+v, Simulate %+v", i, g, w)
		}
	}
	if res.PrefixHits != st.PrefixCacheHits || res.PrefixHits == 0 {
		t.Errorf("prefix hits: fleet %d, Simulate %d (want equal, not 0)", res.PrefixHits, st.PrefixCacheHits)
	}
}

// Malformed or impossible studies are refused before any run, with the
// field at fault named.
func TestValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		mut   func(*Study)
	}{
		{"replicas", func(s *Study) { s.Replicas = []int{5} }}, // 4 GPUs
		{"replicas", func(s *Study) { s.Replicas = []int{0} }},
		{"gpus[0].count", func(s *Study) { s.GPUs[0].Count = 0 }},
		{"gpus[1].profile", func(s *Study) { s.GPUs[1].Profile = "tpu" }},
		{"gpus", func(s *Study) { s.GPUs = nil }},
		{"ladder.min", func(s *Study) { s.Ladder = &Ladder{Min: 8, Max: 4, Steps: 3} }},
		{"qps", func(s *Study) { s.QPS = []float64{-1} }},
		{"strategies", func(s *Study) { s.Strategies = []string{"fastest"} }},
		{"seeds", func(s *Study) { s.Seeds = nil }},
		{"engine.gpu_mem_util", func(s *Study) { s.Engine.GPUMemUtil = 1.5 }},
		{"router.telemetry_stale", func(s *Study) { s.Router.TelemetryStale = 0 }},
		{"slo.tpot", func(s *Study) { s.SLO.TPOT = 0 }},
		{"workload.shared_prefix.question_len", func(s *Study) { s.Workload.SharedPrefix.QuestionLen = 0 }},
		{"workload.trace", func(s *Study) { s.Workload.Kind = KindTrace }},
		{"workload.kind", func(s *Study) { s.Workload.Kind = "zipf" }},
		{"workload.arrivals", func(s *Study) { s.Workload.Arrivals = ArrivalsTrace }}, // shared_prefix has no times
	} {
		s := smallStudy()
		s.Replicas = []int{1}
		c.mut(&s)
		var progress bytes.Buffer
		_, err := Execute(s, 0, &progress)
		if err == nil || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%s: got %v, want an error naming it", c.field, err)
		}
		if progress.Len() > 0 {
			t.Errorf("%s: runs started before the refusal: %s", c.field, progress.String())
		}
	}
	if err := smallStudy().Validate(); err != nil {
		t.Fatalf("the small study is valid: %v", err)
	}
}

// A trace lacking a field is refused before any run, naming the field.
func TestTraceMissingFieldRefused(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(csv, []byte("arrived_at,num_prefill_tokens\n0,100\n1,200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(jsonl, []byte(`{"timestamp": 0, "output_length": 5, "hash_ids": [1]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, field := range map[string]string{csv: "num_decode_tokens", jsonl: "input_length"} {
		s := smallStudy()
		s.Workload = Workload{Kind: KindTrace, Trace: path}
		var progress bytes.Buffer
		_, err := Execute(s, 0, &progress)
		if err == nil || !strings.Contains(err.Error(), "workload.trace") || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want workload.trace and %s named", filepath.Base(path), err, field)
		}
		if progress.Len() > 0 {
			t.Errorf("%s: runs started: %s", path, progress.String())
		}
	}
}

// The vendored traces run through the fleet: Azure rows share no prefix,
// Mooncake rows do; trace arrivals keep the trace's order of arrival and
// its mean rate.
func TestTraceWorkloads(t *testing.T) {
	traces := filepath.Join("..", "traces")
	for _, c := range []struct {
		file     string
		arrivals string
		hits     bool
	}{
		{"azure-conv-2023.csv", ArrivalsPoisson, false},
		{"azure-code-2023.csv", ArrivalsTrace, false},
		{"mooncake-conversation.jsonl", ArrivalsTrace, true},
	} {
		s := smallStudy()
		s.Workload = Workload{Kind: KindTrace, Trace: filepath.Join(traces, c.file), Requests: 60, Arrivals: c.arrivals}
		s.QPS = []float64{4}
		res := runOnce(t, s, "scored", 2, 1)
		if len(res.Requests) != 60 {
			t.Fatalf("%s: %d requests, want 60", c.file, len(res.Requests))
		}
		for i, r := range res.Requests {
			if r.Outcome != OutcomeOK || r.FirstToken < r.Arrival || r.Done < r.FirstToken {
				t.Fatalf("%s: request %d: %+v", c.file, i, r)
			}
		}
		if got := res.PrefixHits > 0; got != c.hits {
			t.Errorf("%s: prefix hits %d, want hits: %v", c.file, res.PrefixHits, c.hits)
		}
		last := res.Requests[len(res.Requests)-1].Arrival
		if rate := float64(len(res.Requests)-1) / last.Seconds(); c.arrivals == ArrivalsTrace && (rate < 3.99 || rate > 4.01) {
			t.Errorf("%s: trace arrivals at %.3f req/s, want 4", c.file, rate)
		}
	}
}

// Every request is one decision, made on a snapshot at most one refresh
// interval old: about half of one on average, each replica refreshing on
// its own phase.
func TestSnapshotAges(t *testing.T) {
	s := smallStudy()
	s.Router.RefreshInterval = 200 * time.Millisecond
	res := runOnce(t, s, "scored", 3, 1)
	if res.Decisions != len(res.Requests) {
		t.Fatalf("%d decisions for %d requests", res.Decisions, len(res.Requests))
	}
	mean := res.SnapshotAge / time.Duration(res.Decisions)
	if mean < 50*time.Millisecond || mean > 150*time.Millisecond {
		t.Errorf("mean snapshot age %v, want about 100ms", mean)
	}
}
