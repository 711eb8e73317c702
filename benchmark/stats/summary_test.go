package stats

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

func ok(start, ttft, e2e time.Duration, node string, itls ...time.Duration) loadgen.Result {
	return loadgen.Result{Start: start, TTFT: ttft, Latency: e2e, Status: 200, Node: node, ITLs: itls, Tokens: len(itls) + 1}
}

func TestSLOGood(t *testing.T) {
	slo := SLO{TTFT: time.Second, ITL: 100 * time.Millisecond}
	gaps := func(n int, d time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = d
		}
		return out
	}
	tests := []struct {
		name string
		r    loadgen.Result
		want bool
	}{
		{"fast", ok(0, 200*time.Millisecond, time.Second, "a", gaps(10, 20*time.Millisecond)...), true},
		{"slow first token", ok(0, 1500*time.Millisecond, 2*time.Second, "a"), false},
		{"one token, no gap", ok(0, 100*time.Millisecond, 100*time.Millisecond, "a"), true},
		{"a stall in 200 gaps passes p99", ok(0, 100*time.Millisecond, 5*time.Second, "a", append(gaps(199, 20*time.Millisecond), 2*time.Second)...), true},
		{"stalls beyond p99 fail", ok(0, 100*time.Millisecond, 5*time.Second, "a", append(gaps(90, 20*time.Millisecond), gaps(10, 300*time.Millisecond)...)...), false},
		{"error", loadgen.Result{Status: 503}, false},
	}
	for _, tt := range tests {
		if got := slo.Good(tt.r); got != tt.want {
			t.Errorf("%s: Good = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	slo := DefaultSLO()
	ms := time.Millisecond
	rs := []loadgen.Result{
		ok(0, 100*ms, time.Second, "a", 10*ms, 10*ms),                                    // good, 100 tok/s
		ok(100*ms, 200*ms, 2*time.Second, "b", 20*ms, 20*ms),                             // good, 50 tok/s
		ok(200*ms, 3*time.Second, 4*time.Second, "a", 10*ms),                             // TTFT over the SLO
		{Start: 300 * ms, Status: 429},                                                   // error
		{Start: 400 * ms, Latency: 9 * time.Second, Cut: true},                           // unfinished, no token
		{Start: 500 * ms, TTFT: 50 * ms, Latency: 8 * time.Second, Cut: true, Tokens: 3}, // unfinished after its first token
	}
	s := Summarize(rs, slo)
	if s.Requests != 6 || s.OK != 3 || s.Errors != 1 || s.Unfinished != 2 {
		t.Fatalf("counts %+v", s)
	}
	if s.ErrorKinds["http 429"] != 1 {
		t.Errorf("error kinds %v", s.ErrorKinds)
	}
	if s.PerWorker["a"] != 2 || s.PerWorker["b"] != 1 {
		t.Errorf("per worker %v", s.PerWorker)
	}
	if math.Abs(s.GoodFraction-2.0/6) > 1e-9 {
		t.Errorf("good fraction %g, want 2/6", s.GoodFraction)
	}
	// Arrivals span 500 ms for 6 requests: 10 req/s offered; 3 completed.
	if math.Abs(s.Throughput-5) > 1e-9 || math.Abs(s.Goodput-10.0/3) > 1e-9 {
		t.Errorf("throughput %g goodput %g, want 5 and 3.33", s.Throughput, s.Goodput)
	}
	// TTFTs: 50, 100, 200, 3000 exact and one bound (9 s): p50 is 200.
	if s.TTFTP50 != 200 || s.TTFTP99 != 9000 || !slices.Contains(s.LowerBounds, "ttft_p99_ms") {
		t.Errorf("ttft p50 %g p99 %g bounds %v", s.TTFTP50, s.TTFTP99, s.LowerBounds)
	}
	if slices.Contains(s.LowerBounds, "ttft_p50_ms") {
		t.Error("p50 TTFT is exact")
	}
	if !slices.Contains(s.LowerBounds, "e2e_p99_ms") {
		t.Errorf("e2e p99 must be a lower bound: %v", s.LowerBounds)
	}
	if s.ITLP99 != 20 {
		t.Errorf("pooled ITL p99 %g, want 20", s.ITLP99)
	}
	// (tokens-1)/(e2e-ttft) of each completed request.
	mean, cv := MeanCV([]float64{2 / 0.9, 2 / 1.8, 1 / 1.0})
	if math.Abs(s.TPSMean-mean) > 1e-9 || math.Abs(s.TPSCV-cv) > 1e-9 {
		t.Errorf("tokens/s mean %g cv %g, want %g %g", s.TPSMean, s.TPSCV, mean, cv)
	}
}

func TestTokensPerSecond(t *testing.T) {
	r := loadgen.Result{Status: 200, Tokens: 11, TTFT: time.Second, Latency: 3 * time.Second}
	if got := r.TokensPerSecond(); got != 5 {
		t.Errorf("10 tokens over 2 s = %g tok/s, want 5", got)
	}
	if (loadgen.Result{Tokens: 1, Latency: time.Second}).TokensPerSecond() != 0 {
		t.Error("one token has no decode rate")
	}
}
