package sim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
)

// pdRun is a 3-A100 fleet, the first with the prefill role, on 12
// summarization requests at 1 req/s.
func pdRun(t *testing.T) (Run, []Request) {
	t.Helper()
	s := DefaultStudy()
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 3}}
	s.Engine.StreamSummary = true
	s.Workload = Workload{Kind: KindSummarization, Requests: 12}
	src, err := s.Workload.load()
	if err != nil {
		t.Fatal(err)
	}
	run := Run{
		GPUs: s.GPUs, Engine: s.Engine, Replicas: 1, Strategy: "round_robin", QPS: 1, Seed: 3, Router: s.Router,
		Disagg: Disagg{Prefill: 1, LinkGbps: 200},
	}
	return run, src.requests(1, 3)
}

// A paired request runs its prompt on the prefill GPU, then decodes on its
// own GPU with the KV loaded: its first token comes after both, every
// token after it is a gap, and the prefill GPU computed its prompt.
func TestPairedRequestRunsBothLegs(t *testing.T) {
	run, reqs := pdRun(t)
	res, err := simulateWith(run, reqs, func(*scheduler.Ticket) string { return "a100-0" })
	if err != nil {
		t.Fatal(err)
	}
	alone, err := simulateWith(run, reqs, func(*scheduler.Ticket) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Requests {
		if r.Outcome != OutcomeOK || r.Tokens != reqs[i].Output || len(r.Gaps) != r.Tokens-1 {
			t.Fatalf("request %d: %+v", i, r)
		}
		if r.Prefill != 0 || alone.Requests[i].Prefill != -1 {
			t.Errorf("request %d: prefill GPU %d paired, %d alone", i, r.Prefill, alone.Requests[i].Prefill)
		}
		// A 8-16k prompt's prefill then its load is far longer than the
		// decode step after it.
		if r.TTFT() <= 0 || r.FirstToken < r.Arrival {
			t.Errorf("request %d: TTFT %v", i, r.TTFT())
		}
	}
	if res.PrefixQueries == 0 {
		t.Error("no prompt reached a prefix cache")
	}
	if alone.Requests[0].TTFT() == res.Requests[0].TTFT() {
		t.Error("pairing changed nothing")
	}
}

func TestPDStudyValidateAndConfigs(t *testing.T) {
	s := PDStudy{Study: DefaultStudy(), Splits: []int{6, 0, 4}, Thresholds: []int{0, 4096}, LinkGbps: 100}
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 8}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range s.configs() {
		got = append(got, PDSummary{Prefill: d.Prefill, Decode: 8 - d.Prefill, MinUncached: d.MinUncached}.Label())
	}
	want := "aggregated 8|6P+2D t=0|6P+2D t=4096|4P+4D t=0|4P+4D t=4096"
	if strings.Join(got, "|") != want {
		t.Errorf("configs %q, want %q", strings.Join(got, "|"), want)
	}
	for name, bad := range map[string]PDStudy{
		"all prefill":  {Study: s.Study, Splits: []int{8}, Thresholds: []int{0}, LinkGbps: 100},
		"no link":      {Study: s.Study, Splits: []int{4}, Thresholds: []int{0}},
		"no threshold": {Study: s.Study, Splits: []int{4}, LinkGbps: 100},
		"no split":     {Study: s.Study, Thresholds: []int{0}, LinkGbps: 100},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestExecutePDReports(t *testing.T) {
	s := PDStudy{Study: DefaultStudy(), Splits: []int{0, 1}, Thresholds: []int{0}, LinkGbps: 200}
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 3}}
	s.Workload = Workload{Kind: KindSummarization, Requests: 10}
	s.QPS, s.Seeds = []float64{1}, []uint64{1, 2}
	rep, err := ExecutePD(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Summaries) != 2 || rep.Summaries[1].ITLRatio == nil || rep.Summaries[0].ITLRatio != nil {
		t.Fatalf("summaries %+v", rep.Summaries)
	}
	if n := len(rep.Aims()); n != 3 {
		t.Errorf("%d aims, want 3", n)
	}
	var md, js bytes.Buffer
	rep.WriteMarkdown(&md)
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| aggregated 3 |", "| 1P+2D t=0 |", "p99 ITL / aggregated <= 0.5"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(js.String(), `"aims"`) {
		t.Error("JSON lacks the aims")
	}
}

// The product's router on a 1+2 split: past the threshold every request
// is paired with the prefill GPU and decoded on another; over every
// prompt, none is; and a prompt mostly cached on its decode GPU is never
// paired.
func TestRouterPairsByThreshold(t *testing.T) {
	run, reqs := pdRun(t)
	run.Strategy = "predicted"
	for _, tt := range []struct {
		threshold int
		paired    bool
	}{{0, true}, {SummaryPromptMax + 1, false}} {
		run.Disagg.MinUncached = tt.threshold
		res, err := simulate(run, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Requests {
			if r.Outcome != OutcomeOK || r.GPU == 0 || (r.Prefill == 0) != tt.paired {
				t.Fatalf("threshold %d, request %d: GPU %d, prefill GPU %d, %s", tt.threshold, i, r.GPU, r.Prefill, r.Outcome)
			}
		}
		if tt.paired && res.Served[0] != 0 {
			t.Errorf("the prefill GPU served %d whole requests", res.Served[0])
		}
	}

	s := smallStudy()
	s.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 3}}
	s.Engine.StreamSummary = true
	src, err := s.Workload.load()
	if err != nil {
		t.Fatal(err)
	}
	run = Run{
		GPUs: s.GPUs, Engine: s.Engine, Replicas: 1, Strategy: "predicted", QPS: 4, Seed: 2, Router: s.Router,
		Disagg: Disagg{Prefill: 1, MinUncached: 512, LinkGbps: 200},
	}
	res, err := simulate(run, src.requests(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	paired, cached := 0, 0
	for i, r := range res.Requests {
		if r.Outcome != OutcomeOK {
			t.Fatalf("request %d: %s", i, r.Outcome)
		}
		if r.Prefill >= 0 {
			paired++
			if float64(r.DecodeCached) > MostlyCached*float64(r.Prompt) {
				cached++
			}
		}
	}
	if paired == 0 || paired == len(res.Requests) || cached != 0 {
		t.Errorf("%d of %d paired, %d of them mostly cached on their decode GPU", paired, len(res.Requests), cached)
	}
}
