package benchmark

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	pm, _ := MeanCV(p)
	om, _ := MeanCV(o)
	// The Azure conversation trace: prompt mean about 1,155, output about 211.
	if pm < 1000 || pm > 1300 || om < 150 || om > 230 {
		t.Errorf("means: prompt %.0f output %.0f", pm, om)
	}
}

func TestWindow(t *testing.T) {
	for _, tt := range []struct {
		n          int
		warm, tail float64
		from, to   int
	}{{200, 0.1, 0.2, 20, 160}, {10, 0, 0, 0, 10}, {3, 0.5, 0.5, 2, 3}} {
		if from, to := window(tt.n, tt.warm, tt.tail); from != tt.from || to != tt.to {
			t.Errorf("window(%d, %g, %g) = %d, %d; want %d, %d", tt.n, tt.warm, tt.tail, from, to, tt.from, tt.to)
		}
	}
}
