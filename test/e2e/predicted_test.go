package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/test/stack"
)

// predictedFleet is n uncapped workers decoding 50 tokens/s after a TTFT
// of ttftMs (no prefix cache, so every prompt takes it), under strategy
// predicted with its default objectives (TTFT
// 2 s, TPOT 100 ms): the configuration of a new install.
func predictedFleet(t *testing.T, n int, ttftMs string) *env {
	t.Helper()
	var ws []workerSpec
	for i := range n {
		ws = append(ws, workerSpec{ID: fmt.Sprintf("w-%d", i), Model: "m", Cap: -1, Args: []string{"--tokens-per-second", "50", "--ttft-ms", ttftMs, "--prefix-cache=false"}})
	}
	return newEnv(t, ws, func(c *config.Config) {
		c.Strategy = config.Default().Strategy
		if c.Strategy != scoring.Predicted {
			t.Fatalf("default strategy %q, want predicted", c.Strategy)
		}
	})
}

// limits reads each worker's limit in force from a fresh snapshot (0: none).
func (e *env) limits() map[string]int {
	e.t.Helper()
	if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range e.Router.Scheduler().Snapshot().Workers {
		out[w.Spec.ID] = state.CapWith(w.Spec.MaxConcurrency, w.Limit.Value)
		if w.Limit.Value > 0 && caps.FromState(w.Limit).Basis != caps.BasisModel {
			e.t.Errorf("%s: limit %d not from the latency model", w.Spec.ID, w.Limit.Value)
		}
	}
	return out
}

// loadUntil keeps conc streamed requests of tokens in flight until stop
// is closed, and returns what they measured.
func loadUntil(e *env, c *loadgen.Client, conc, tokens int, epoch time.Time, stop <-chan struct{}) func() []loadgen.Result {
	var mu sync.Mutex
	var out []loadgen.Result
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := c.Do(e.ctx, loadgen.Request{Model: "m", MaxTokens: tokens, PromptTokens: 200, Stream: true}, epoch)
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			}
		}()
	}
	return func() []loadgen.Result {
		wg.Wait()
		return out
	}
}

// tpot is a streamed result's time per output token after the first.
func tpot(r loadgen.Result) time.Duration {
	if r.Tokens < 2 || r.Latency <= r.TTFT {
		return 0
	}
	return (r.Latency - r.TTFT) / time.Duration(r.Tokens-1)
}

// TestPredictedAvoidsASlowedWorker: three uncapped workers under steady
// load with the default strategy; one slows down tenfold (its TPOT goes
// from 20 ms to 200 ms, past the 100 ms objective). Within seconds it
// stops receiving new requests, its limit from the latency model falls,
// and the requests placed on the other two meet their objectives.
func TestPredictedAvoidsASlowedWorker(t *testing.T) {
	e := predictedFleet(t, 3, "50")
	c := loadgen.NewClient(e.URL, 16, "")
	defer c.Close()
	const conc, tokens = 9, 20 // 0.45 s a request at normal speed
	epoch := time.Now()
	stop := make(chan struct{})
	results := loadUntil(e, c, conc, tokens, epoch, stop)

	// Warm up until every worker's model is known and limited by it.
	var before map[string]int
	err := stack.WaitFor(e.ctx, 30*time.Second, func() error {
		before = e.limits()
		for id, l := range before {
			if l == 0 {
				return fmt.Errorf("%s has no limit from its model yet", id)
			}
		}
		return nil
	})
	if err != nil {
		close(stop)
		results()
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // steady state, every worker serving
	slowedAt := time.Since(epoch)
	e.adminConfig("w-2", `{"slowdown": 10}`)
	var limitAfter int
	var limitFell time.Duration
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		l := e.limits()["w-2"]
		if limitFell == 0 && 4*l < 3*before["w-2"] { // a quarter down: past the fit's jitter
			limitFell = time.Since(epoch) - slowedAt
		}
		limitAfter = l
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	all := results()
	end := time.Since(epoch)

	var lastOnSlow time.Duration
	var after, onSlow, othersMiss, othersAfter, failed int
	for _, r := range all {
		if !r.OK() {
			failed++
			continue
		}
		if r.Start < slowedAt {
			continue
		}
		after++
		if r.Node == "w-2" {
			onSlow++
			lastOnSlow = max(lastOnSlow, r.Start-slowedAt)
			continue
		}
		othersAfter++
		if r.TTFT > 2*time.Second || tpot(r) > 100*time.Millisecond {
			othersMiss++
		}
	}
	t.Logf("limits before the slowdown %v; w-2's %d at the end (a quarter down %.1f s after the slowdown)", before, limitAfter, limitFell.Seconds())
	t.Logf("%d requests placed in the %.1f s after w-2 slowed: %d on w-2, the last %.1f s after; %d on the others, %d missing an objective; %d failed overall",
		after, (end - slowedAt).Seconds(), onSlow, lastOnSlow.Seconds(), othersAfter, othersMiss, failed)
	if failed > 0 {
		t.Errorf("%d requests failed", failed)
	}
	if lastOnSlow > 8*time.Second {
		t.Errorf("the slowed worker still got a request %.1f s after it slowed, want none after 8 s", lastOnSlow.Seconds())
	}
	if limitFell == 0 || 4*limitAfter >= 3*before["w-2"] {
		t.Errorf("w-2's limit went from %d to %d: want it a quarter lower", before["w-2"], limitAfter)
	}
	if othersAfter < 50 || othersMiss > othersAfter/50 {
		t.Errorf("%d of %d requests on the healthy workers missed an objective, want at most 2 %%", othersMiss, othersAfter)
	}
}

// TestPredictedShedsUnmeetableTTFT: two workers whose first token takes
// 1 s. Once their models are learned, a request asking for a 500 ms TTFT,
// which no worker can give even idle, gets 429 slo_unattainable at once,
// an OpenAI-style error, while requests with the default 2 s objective,
// sent beside them, succeed within it.
func TestPredictedShedsUnmeetableTTFT(t *testing.T) {
	e := predictedFleet(t, 2, "1000")
	c := loadgen.NewClient(e.URL, 16, "")
	defer c.Close()
	epoch := time.Now()
	// Learn: each worker needs a few dozen observations, of prompts of
	// several lengths, so that the model tells the fixed 1 s from the
	// prompt's share.
	err := stack.WaitFor(e.ctx, 45*time.Second, func() error {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Do(e.ctx, loadgen.Request{Model: "m", MaxTokens: 5, PromptTokens: 50 + 150*i, Stream: true}, epoch)
			}()
		}
		wg.Wait()
		if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
			return err
		}
		for _, w := range e.Router.Scheduler().Snapshot().Workers {
			if w.Limit.Value == 0 { // set once the model is known
				m := e.Router.Scheduler().LatencyModel(w.Spec.ID, "m")
				return fmt.Errorf("%s: no limit yet (model %.1f TTFT and %.1f TPOT observations, %d served)",
					w.Spec.ID, m.TTFT.Samples, m.TPOT.Samples, e.served(w.Spec.ID))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	body := `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 100) + `"}]}`
	type shed struct {
		status int
		took   time.Duration
		code   string
		reason string
	}
	var mu sync.Mutex
	var sheds []shed
	var served []loadgen.Result
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			start := time.Now()
			resp, out := e.post("/v1/chat/completions", body, map[string]string{"x-llm-slo-ttft-ms": "500"})
			var er struct {
				Error struct{ Code, Type, Message string }
			}
			_ = json.Unmarshal([]byte(out), &er)
			mu.Lock()
			sheds = append(sheds, shed{resp.StatusCode, time.Since(start), er.Error.Code, resp.Header.Get("x-llm-d-request-dropped-reason")})
			mu.Unlock()
		}()
		go func() {
			defer wg.Done()
			r := c.Do(e.ctx, loadgen.Request{Model: "m", MaxTokens: 5, PromptTokens: 100, Stream: true}, epoch)
			mu.Lock()
			served = append(served, r)
			mu.Unlock()
		}()
		if i%5 == 4 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	wg.Wait()

	var slowest time.Duration
	for _, s := range sheds {
		slowest = max(slowest, s.took)
		if s.status != http.StatusTooManyRequests || s.code != "slo_unattainable" || s.reason != "rejected-saturated" {
			t.Errorf("a request with an unmeetable TTFT objective got %d %q (dropped reason %q), want 429 slo_unattainable", s.status, s.code, s.reason)
		}
	}
	var ok, late int
	var worstTTFT time.Duration
	for _, r := range served {
		if r.OK() {
			ok++
			worstTTFT = max(worstTTFT, r.TTFT)
			if r.TTFT > 2*time.Second {
				late++
			}
		}
	}
	t.Logf("%d requests asking for 500 ms shed, the slowest answer in %v; %d of %d with the default objective served, worst TTFT %v, %d past 2 s",
		len(sheds), slowest.Round(time.Millisecond), ok, len(served), worstTTFT.Round(time.Millisecond), late)
	if slowest > 500*time.Millisecond {
		t.Errorf("shedding took up to %v, want it at once (under 500 ms)", slowest)
	}
	if ok != len(served) || late > 0 {
		t.Errorf("%d of %d requests with a meetable objective served, %d past it", ok, len(served), late)
	}
}
