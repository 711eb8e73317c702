package gpusim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func simConfig(mut func(*Config)) Config {
	c := DefaultConfig()
	c.Listen, c.Models = "sim", []string{"m"}
	if mut != nil {
		mut(&c)
	}
	return c
}

// heavyLoad is a burst of long requests, far more than the KV cache holds.
func heavyLoad(n int, seed uint64) []SimRequest {
	rng := rand.New(rand.NewPCG(seed, seed))
	reqs := make([]SimRequest, n)
	for i := range reqs {
		reqs[i] = SimRequest{
			Arrival:      time.Duration(rng.Int64N(int64(2 * time.Second))),
			PromptTokens: 1000 + rng.IntN(5000),
			OutputTokens: 100 + rng.IntN(1500),
		}
	}
	return reqs
}

func TestCalibratedInvariantsUnderPressure(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"a40 paged", simConfig(func(c *Config) { c.Profile = "a40-llama2-7b" })},
		{"h100 small batch budget", simConfig(func(c *Config) { c.Profile = "h100-llama2-7b"; c.MaxBatchedTokens = 128; c.GPUMemUtil = 0.3 })},
		{"a100 few seqs", simConfig(func(c *Config) { c.Profile = "a100-llama3-8b"; c.MaxNumSeqs = 8; c.GPUMemUtil = 0.3 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := heavyLoad(150, 7)
			steps := 0
			res, st, err := simulate(tt.cfg, reqs, func(e *Engine) error {
				steps++
				return e.checkInvariants()
			})
			if err != nil {
				t.Fatal(err)
			}
			preempted := 0
			for i, r := range res {
				if r.Rejected || r.Tokens != reqs[i].OutputTokens || r.Done < r.FirstToken || r.FirstToken < r.Arrival {
					t.Fatalf("request %d: %+v, want %d tokens", i, r, reqs[i].OutputTokens)
				}
				if r.Preemptions > 0 {
					preempted++
				}
			}
			if st.Running != 0 || st.Waiting != 0 || st.KVUsedTokens != 0 || st.Completed != uint64(len(reqs)) {
				t.Errorf("end state %+v", st)
			}
			t.Logf("%d steps, %d preemptions over %d requests", steps, st.Preemptions, preempted)
			if tt.cfg.MaxNumSeqs > 8 && st.Preemptions == 0 {
				t.Error("no preemption under a load far beyond the KV cache")
			}
		})
	}
}

func TestSlotsNeverExceeded(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"simple timing", simConfig(func(c *Config) { c.Slots = 3; c.CtxSize = 8192 })},
		{"calibrated timing", simConfig(func(c *Config) { c.Slots = 3; c.CtxSize = 8192; c.Profile = "a40-llama2-7b" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := heavyLoad(40, 3)
			maxRunning, maxWaiting := 0, 0
			res, st, err := simulate(tt.cfg, reqs, func(e *Engine) error {
				maxRunning = max(maxRunning, len(e.running))
				maxWaiting = max(maxWaiting, len(e.waiting))
				return e.checkInvariants()
			})
			if err != nil {
				t.Fatal(err)
			}
			if maxRunning != 3 || maxWaiting == 0 || st.Preemptions != 0 {
				t.Errorf("max running %d (want 3), max deferred %d, preemptions %d", maxRunning, maxWaiting, st.Preemptions)
			}
			for i, r := range res {
				if r.Tokens != reqs[i].OutputTokens {
					t.Fatalf("request %d: %d tokens, want %d", i, r.Tokens, reqs[i].OutputTokens)
				}
			}
		})
	}
}

func TestSimpleTiming(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name      string
		cfg       Config
		reqs      []SimRequest
		wantFirst []time.Duration
		wantDone  []time.Duration
	}{
		{
			name:      "ttft then fixed rate",
			cfg:       simConfig(func(c *Config) { c.TTFTMs, c.TokensPerSecond = 50, 50 }),
			reqs:      []SimRequest{{0, 10, 10, nil, false}, {5 * ms, 10, 1, nil, false}},
			wantFirst: []time.Duration{50 * ms, 55 * ms},
			wantDone:  []time.Duration{230 * ms, 55 * ms},
		},
		{
			name:      "instant",
			cfg:       simConfig(func(c *Config) { c.TTFTMs, c.TokensPerSecond = 0, 0 }),
			reqs:      []SimRequest{{0, 10, 8192, nil, false}, {time.Second, 10, 3, nil, false}},
			wantFirst: []time.Duration{0, time.Second},
			wantDone:  []time.Duration{0, time.Second},
		},
		{
			name:      "max concurrency queues FIFO",
			cfg:       simConfig(func(c *Config) { c.TTFTMs, c.TokensPerSecond, c.MaxConcurrency = 10, 100, 1 }),
			reqs:      []SimRequest{{0, 10, 5, nil, false}, {0, 10, 5, nil, false}, {0, 10, 1, nil, false}},
			wantFirst: []time.Duration{10 * ms, 60 * ms, 110 * ms},
			wantDone:  []time.Duration{50 * ms, 100 * ms, 110 * ms},
		},
		{
			name:      "nominal KV capacity limits nothing",
			cfg:       simConfig(func(c *Config) { c.TTFTMs, c.TokensPerSecond, c.KVCapacityTokens = 10, 100, 100 }),
			reqs:      []SimRequest{{0, 60, 5, nil, false}, {0, 60, 5, nil, false}},
			wantFirst: []time.Duration{10 * ms, 10 * ms},
			wantDone:  []time.Duration{50 * ms, 50 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _, err := simulate(tt.cfg, tt.reqs, func(e *Engine) error { return e.checkInvariants() })
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.FirstToken != tt.wantFirst[i] || r.Done != tt.wantDone[i] || r.Tokens != tt.reqs[i].OutputTokens {
					t.Errorf("request %d: first %v done %v tokens %d; want %v %v %d",
						i, r.FirstToken, r.Done, r.Tokens, tt.wantFirst[i], tt.wantDone[i], tt.reqs[i].OutputTokens)
				}
			}
		})
	}
}

func TestCalibratedPrefillTiming(t *testing.T) {
	cfg := simConfig(func(c *Config) { c.Profile = "a100-llama3-8b" })
	p, _ := LookupProfile(cfg.Profile)
	res, _, err := Simulate(cfg, []SimRequest{{0, 1000, 3, nil, false}})
	if err != nil {
		t.Fatal(err)
	}
	// Chunked prefill: 512 then 488 tokens, then two decodes.
	want := p.StepTime(512, 512, 1) + p.StepTime(488, 1000, 1)
	if got := res[0].TTFT(); got != want {
		t.Errorf("TTFT %v, want %v", got, want)
	}
	want += p.StepTime(1, 1001, 1) + p.StepTime(1, 1002, 1)
	if res[0].Done != want {
		t.Errorf("done at %v, want %v", res[0].Done, want)
	}
}

// TestSlowdownScalesTime: a fleet slowed down by K from the start runs the
// same steps K times longer, so every time of the run scales by K.
func TestSlowdownScalesTime(t *testing.T) {
	reqs := []SimRequest{{0, 1000, 5, nil, false}, {10 * time.Millisecond, 300, 40, nil, false}, {30 * time.Millisecond, 2000, 3, nil, false}}
	base, _, err := Simulate(simConfig(func(c *Config) { c.Profile = "h100-llama2-7b" }), reqs)
	if err != nil {
		t.Fatal(err)
	}
	scaled := make([]SimRequest, len(reqs))
	for i, r := range reqs {
		r.Arrival *= 4
		scaled[i] = r
	}
	slow, _, err := Simulate(simConfig(func(c *Config) { c.Profile = "h100-llama2-7b"; c.Slowdown = 4 }), scaled)
	if err != nil {
		t.Fatal(err)
	}
	for i := range base {
		for _, pair := range [][2]time.Duration{{base[i].FirstToken, slow[i].FirstToken}, {base[i].Done, slow[i].Done}} {
			if d := pair[1] - 4*pair[0]; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("request %d: slowed %v, want 4 × %v", i, pair[1], pair[0])
			}
		}
	}
}

func TestRejectsWhatNeverFits(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		req  SimRequest
	}{
		{"slot context", simConfig(func(c *Config) { c.Slots, c.CtxSize = 2, 100 }), SimRequest{0, 90, 20, nil, false}},
		{"paged cache", simConfig(func(c *Config) { c.Profile = "a40-llama2-7b" }), SimRequest{0, 60_000, 20, nil, false}},
	}
	for _, tt := range tests {
		res, _, err := Simulate(tt.cfg, []SimRequest{tt.req, {0, 10, 2, nil, false}})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !res[0].Rejected || res[1].Rejected || res[1].Tokens != 2 {
			t.Errorf("%s: %+v", tt.name, res)
		}
	}
	e, _ := newEngine(simConfig(nil), &virtualClock{})
	if _, err := e.Submit(Request{Model: "other", PromptTokens: 1, MaxTokens: 1}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestCancelFreesAtOnce(t *testing.T) {
	for _, cfg := range []Config{
		simConfig(nil),
		simConfig(func(c *Config) { c.Profile = "h100-llama2-7b" }),
		simConfig(func(c *Config) { c.Slots = 1 }),
	} {
		e, err := newEngine(cfg, &virtualClock{})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := e.Submit(Request{Model: "m", PromptTokens: 100, MaxTokens: 10})
		b, _ := e.Submit(Request{Model: "m", PromptTokens: 100, MaxTokens: 10})
		e.mu.Lock()
		e.sched.plan(0)
		e.mu.Unlock()
		if st := e.State(); st.Running == 0 || st.KVUsedTokens == 0 {
			t.Fatalf("after admission: %+v", st)
		}
		a.Close()
		b.Close()
		b.Close()
		e.mu.Lock()
		e.sched.advance(time.Second) // the step in flight must skip them
		e.mu.Unlock()
		if st := e.State(); st.Running != 0 || st.Waiting != 0 || st.KVUsedTokens != 0 {
			t.Errorf("after cancel: %+v", st)
		}
		if err := e.checkInvariants(); err != nil {
			t.Error(err)
		}
	}
}

// TestLateWakeUpsDoNotStretchPasses: on the wall clock each pass's end is
// noticed a little late. Back-to-back passes must still follow the planned
// timeline (the next pass is due when the last was due to end), so a busy
// host does not shrink the simulated GPU; after an idle gap, or a stall
// longer than maxCatchUp, timing restarts from the present.
func TestLateWakeUpsDoNotStretchPasses(t *testing.T) {
	e, err := newEngine(simConfig(func(c *Config) { c.Profile = "h100-llama2-7b" }), &virtualClock{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(Request{Model: "m", PromptTokens: 100, MaxTokens: 50}); err != nil {
		t.Fatal(err)
	}
	const lag = 300 * time.Microsecond
	e.mu.Lock()
	defer e.mu.Unlock()
	wait, ok := e.sched.plan(0)
	if !ok || wait <= lag {
		t.Fatalf("first pass: wait %v ok %v", wait, ok)
	}
	due := wait // the planned end of the pass in flight
	e.recordTimes = true
	s := e.running[0]
	for i := range 10 {
		now := due + lag // the loop notices the end late
		e.sched.advance(now)
		wait, ok = e.sched.plan(now)
		if !ok {
			t.Fatalf("pass %d: nothing planned", i)
		}
		b := e.sched.(*batchScheduler)
		if got, want := now+wait, due+b.lastStep.dur; got != want {
			t.Fatalf("pass %d ends at %v, want %v (planned end of the last pass + its duration)", i, got, want)
		}
		if i > 0 && s.tokenTimes[len(s.tokenTimes)-1] != due {
			t.Fatalf("pass %d: token at %v, want the pass's planned end %v", i, s.tokenTimes[len(s.tokenTimes)-1], due)
		}
		due += b.lastStep.dur
	}
	// A stall beyond maxCatchUp is lost time: the next pass starts now.
	now := due + maxCatchUp + time.Millisecond
	e.sched.advance(now)
	wait, _ = e.sched.plan(now)
	if b := e.sched.(*batchScheduler); wait != b.lastStep.dur {
		t.Errorf("after a long stall: wait %v, want a whole pass %v", wait, b.lastStep.dur)
	}
}

// With token times recorded, a simulated request's gaps are its tokens'
// spacing: one fewer than its tokens, summing to its decode time, and
// longer while another request's prefill shares the steps.
func TestSimulateRecordsTokenGaps(t *testing.T) {
	reqs := []SimRequest{{0, 100, 40, nil, false}, {50 * time.Millisecond, 3000, 2, nil, false}}
	res, _, err := Simulate(simConfig(func(c *Config) { c.Profile = "a40-llama2-7b"; c.StreamSummary = true }), reqs)
	if err != nil {
		t.Fatal(err)
	}
	g := res[0].Gaps
	if len(g) != 39 {
		t.Fatalf("%d gaps for 40 tokens", len(g))
	}
	var sum time.Duration
	for _, d := range g {
		sum += d
	}
	if sum != res[0].Done-res[0].FirstToken {
		t.Errorf("gaps sum to %v, decode took %v", sum, res[0].Done-res[0].FirstToken)
	}
	if slices.Max(g) < 2*slices.Min(g) {
		t.Errorf("gaps %v: the long prefill alongside did not stretch any", g)
	}
	plain, _, err := Simulate(simConfig(func(c *Config) { c.Profile = "a40-llama2-7b" }), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if plain[0].Gaps != nil {
		t.Error("gaps recorded without StreamSummary")
	}
}

// The engine's inter-token histogram holds the same gaps the requests saw:
// as many, summing to as much, and as many over a bucket edge (50 ms,
// which only the gaps beside the long prefill pass).
func TestITLHistogramHoldsTheGaps(t *testing.T) {
	reqs := []SimRequest{{0, 100, 40, nil, false}, {50 * time.Millisecond, 3000, 20, nil, false}, {60 * time.Millisecond, 200, 30, nil, false}}
	var eng *Engine
	res, _, err := simulate(simConfig(func(c *Config) { c.Profile = "a40-llama2-7b"; c.StreamSummary = true }), reqs,
		func(e *Engine) error { eng = e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	var n, slow uint64
	var sum time.Duration
	for _, r := range res {
		for _, g := range r.Gaps {
			n++
			sum += g
			if g > 50*time.Millisecond {
				slow++
			}
		}
	}
	h := eng.models["m"].ITL
	edge := slices.Index(h.bounds, 0.05)
	var within uint64
	for _, c := range h.counts[:edge+1] {
		within += c
	}
	if h.count != n || h.count-within != slow || math.Abs(h.sum-sum.Seconds()) > 1e-6 {
		t.Errorf("histogram count %d, over 0.05 s %d, sum %.6f; gaps %d, over 50 ms %d, sum %.6f",
			h.count, h.count-within, h.sum, n, slow, sum.Seconds())
	}
	if slow == 0 {
		t.Error("no gap over 50 ms: the long prefill should stall the others")
	}
}

// A fleet slowed down by a common factor reports its histograms in buckets
// scaled alike, rounded so that a scraper finds 0.1 × 0.15 at 0.015.
func TestHistogramBucketsFollowTheSlowdown(t *testing.T) {
	e, err := newEngine(simConfig(func(c *Config) { c.Slowdown = 0.15 }), &virtualClock{})
	if err != nil {
		t.Fatal(err)
	}
	b := e.models["m"].ITL.bounds
	if len(b) != len(itlBuckets) || !slices.Contains(b, 0.015) || b[0] != 0.0015 {
		t.Errorf("inter-token buckets at slowdown 0.15: %v", b)
	}
	if e.models["m"].TTFT.bounds[0] != 0.00015 {
		t.Errorf("TTFT buckets at slowdown 0.15: %v", e.models["m"].TTFT.bounds)
	}
}
