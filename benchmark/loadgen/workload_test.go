package loadgen

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// writeTrace writes a small trace CSV: request i arrives at i·gap seconds
// with prompt 100+i and output 10+i.
func writeTrace(t *testing.T, n int, gap float64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
	for i := 0; i < n; i++ {
		b.WriteString(strings.Join([]string{strconv.FormatFloat(float64(i)*gap, 'f', -1, 64), strconv.Itoa(100 + i), strconv.Itoa(10 + i)}, ",") + "\n")
	}
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadWorkload(t *testing.T) {
	w, err := LoadWorkload(WorkloadOptions{TracePath: writeTrace(t, 50, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.rows) != 50 || w.rows[3].PromptTokens != 103 || w.rows[3].OutputTokens != 13 {
		t.Fatalf("rows %v", w.rows[:4])
	}
	// Absent trace: the synthetic one, not an error.
	w, err = LoadWorkload(WorkloadOptions{TracePath: filepath.Join(t.TempDir(), "missing.csv")})
	if err != nil || !strings.HasPrefix(w.Source, "synthetic") || len(w.rows) == 0 {
		t.Fatalf("missing trace: %v %q", err, w.Source)
	}
	// A broken trace is an error, not silently synthetic.
	bad := filepath.Join(t.TempDir(), "bad.csv")
	_ = os.WriteFile(bad, []byte("arrived_at,num_prefill_tokens\n0,1\n"), 0o600)
	if _, err := LoadWorkload(WorkloadOptions{TracePath: bad}); err == nil {
		t.Error("trace without num_decode_tokens accepted")
	}
	for _, o := range []WorkloadOptions{{Kind: "nope"}, {Arrivals: "nope"}, {LongShare: 2}} {
		if _, err := LoadWorkload(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestPoissonJobs(t *testing.T) {
	w, err := LoadWorkload(WorkloadOptions{TracePath: writeTrace(t, 5000, 1), Arrivals: ArrivalsPoisson})
	if err != nil {
		t.Fatal(err)
	}
	jobs := w.Jobs(4000, 20, 7)
	if len(jobs) != 4000 || jobs[0].At != 0 {
		t.Fatalf("%d jobs, first at %v", len(jobs), jobs[0].At)
	}
	rate := float64(len(jobs)-1) / jobs[len(jobs)-1].At.Seconds()
	if math.Abs(rate-20)/20 > 0.05 {
		t.Errorf("mean rate %.2f, want 20 ± 5%%", rate)
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].At < jobs[i-1].At {
			t.Fatal("arrivals not sorted")
		}
		// Lengths are consecutive trace rows.
		if jobs[i].Prompt != jobs[i-1].Prompt+1 && jobs[i].Prompt != 100 {
			t.Fatalf("job %d prompt %d after %d", i, jobs[i].Prompt, jobs[i-1].Prompt)
		}
	}
	// Same seed: same shapes, arrivals scaled by the rate.
	twice := w.Jobs(4000, 40, 7)
	for i := range jobs {
		if twice[i].Prompt != jobs[i].Prompt || twice[i].Output != jobs[i].Output {
			t.Fatalf("job %d shape differs between rates", i)
		}
		if d := twice[i].At*2 - jobs[i].At; d > time.Microsecond || d < -time.Microsecond {
			t.Fatalf("job %d at %v, want half of %v", i, twice[i].At, jobs[i].At)
		}
	}
	other := w.Jobs(4000, 20, 8)
	if other[0].Prompt == jobs[0].Prompt && other[1].At == jobs[1].At {
		t.Error("another seed gave the same jobs")
	}
}

func TestTraceArrivals(t *testing.T) {
	path := writeTrace(t, 100, 0.5) // 2 req/s, evenly spaced
	w, err := LoadWorkload(WorkloadOptions{TracePath: path, Arrivals: ArrivalsTrace})
	if err != nil {
		t.Fatal(err)
	}
	jobs := w.Jobs(40, 8, 3) // 4 times faster: gaps of 125 ms
	for i := 1; i < len(jobs); i++ {
		if d := jobs[i].At - jobs[i-1].At; d < 124*time.Millisecond || d > 126*time.Millisecond {
			t.Fatalf("gap %d = %v, want 125ms", i, d)
		}
	}
	// A window longer than the trace wraps around and keeps going.
	long := w.Jobs(250, 2, 3)
	for i := 1; i < len(long); i++ {
		if long[i].At <= long[i-1].At {
			t.Fatalf("wrapped arrivals not increasing at %d: %v then %v", i, long[i-1].At, long[i].At)
		}
	}
}

func TestExtremeMix(t *testing.T) {
	w, err := LoadWorkload(WorkloadOptions{TracePath: writeTrace(t, 3000, 1), Kind: KindExtreme, LongShare: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	jobs := w.Jobs(2000, 5, 1)
	for _, j := range jobs {
		switch j.Output {
		case longOutput:
			long++
		case shortOutput:
		default:
			t.Fatalf("output %d, want %d or %d", j.Output, shortOutput, longOutput)
		}
	}
	if share := float64(long) / float64(len(jobs)); math.Abs(share-0.25) > 0.04 {
		t.Errorf("long share %.3f, want 0.25", share)
	}
	if !strings.Contains(w.Name(), "extreme") {
		t.Errorf("name %q", w.Name())
	}
}

func TestSyntheticTrace(t *testing.T) {
	rows := SyntheticTrace(20000, 1)
	var p, o []float64
	for _, r := range rows {
		p = append(p, float64(r.PromptTokens))
		o = append(o, float64(r.OutputTokens))
		if r.PromptTokens < 1 || r.PromptTokens > 8192 || r.OutputTokens < 1 || r.OutputTokens > 1000 {
			t.Fatalf("out of range: %+v", r)
		}
	}
	mean := func(xs []float64) float64 {
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	pm, om := mean(p), mean(o)
	// The Azure conversation trace: prompt mean about 1,155, output about 211.
	if pm < 1000 || pm > 1300 || om < 150 || om > 230 {
		t.Errorf("means: prompt %.0f output %.0f", pm, om)
	}
}

func TestMaxTokensPolicies(t *testing.T) {
	path := writeTrace(t, 3000, 1)
	bound, err := LoadWorkload(WorkloadOptions{TracePath: path})
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := LoadWorkload(WorkloadOptions{TracePath: path, MaxTokens: MaxTokensOracle})
	if err != nil {
		t.Fatal(err)
	}
	b, o := bound.Jobs(2000, 5, 3), oracle.Jobs(2000, 5, 3)
	absent := 0
	for i := range b {
		if b[i].At != o[i].At || b[i].Output != o[i].Output {
			t.Fatalf("job %d: the policies changed shapes or arrivals", i)
		}
		if o[i].MaxTokens != o[i].Output {
			t.Fatalf("oracle job %d: max_tokens %d, output %d", i, o[i].MaxTokens, o[i].Output)
		}
		switch b[i].MaxTokens {
		case 0:
			absent++
		case MaxTokensCap:
		default:
			t.Fatalf("bound job %d: max_tokens %d", i, b[i].MaxTokens)
		}
	}
	if absent < 900 || absent > 1100 {
		t.Errorf("%d of 2000 without max_tokens, want about half", absent)
	}
	if _, err := LoadWorkload(WorkloadOptions{TracePath: path, MaxTokens: "psychic"}); err == nil {
		t.Error("unknown max_tokens policy accepted")
	}
}

func TestPromptsOfATraceWithoutIDsShareNothing(t *testing.T) {
	w, err := LoadWorkload(WorkloadOptions{TracePath: writeTrace(t, 100, 1)})
	if err != nil {
		t.Fatal(err)
	}
	jobs := w.Jobs(50, 5, 1)
	a, b := BlockHashes(jobs[0], 0), BlockHashes(jobs[1], 0)
	if len(a) == 0 || prefix.Match(a, b) != 0 {
		t.Errorf("two rows share %d leading blocks of %d", prefix.Match(a, b), len(a))
	}
	r := jobs[3].Request("[run 1]", 0)
	if len(r.Content) != jobs[3].Prompt*prefix.BytesPerToken || !strings.HasPrefix(r.Content, "[run 1]") || r.OutputTokens != jobs[3].Output {
		t.Errorf("request %+v for job %+v", r.Content[:20], jobs[3])
	}
}

func TestMooncakeWorkload(t *testing.T) {
	w, err := LoadWorkload(WorkloadOptions{TracePath: "../traces/mooncake-conversation.jsonl", TokenScale: 0.125})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Prefixed() || w.BlockTokens() != 64 || len(w.rows) != 12031 {
		t.Fatalf("prefixed %v, block tokens %d, rows %d", w.Prefixed(), w.BlockTokens(), len(w.rows))
	}
	// Rows 0 and 1 of the trace share their first id only.
	j0 := Job{Prompt: w.rows[0].PromptTokens, Row: 0, Blocks: w.blocks[0]}
	j1 := Job{Prompt: w.rows[1].PromptTokens, Row: 1, Blocks: w.blocks[1]}
	if w.blocks[0][0] != w.blocks[1][0] || w.blocks[0][1] == w.blocks[1][1] {
		t.Fatalf("trace rows changed: %v %v", w.blocks[0][:2], w.blocks[1][:2])
	}
	a, b := BlockHashes(j0, w.BlockTokens()), BlockHashes(j1, w.BlockTokens())
	// One id of 64 tokens is 256 bytes of text after the 7 bytes of
	// `"user""`: the first 4 blocks (256 bytes) are shared, the 5th holds
	// the first different byte.
	if m := prefix.Match(a, b); m != 4 {
		t.Errorf("rows sharing one id share %d blocks, want 4", m)
	}
	if r := j0.Request("", w.BlockTokens()); len(r.Content) != j0.Prompt*prefix.BytesPerToken {
		t.Errorf("prompt of %d bytes, want %d", len(r.Content), j0.Prompt*prefix.BytesPerToken)
	}
}
