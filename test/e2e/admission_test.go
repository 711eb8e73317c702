package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

const (
	opsKey  = "sk-ops-critical-0001" // may use critical
	teamKey = "sk-team-standard-0001"
)

func withKeys(c *config.Config) {
	c.Auth.Keys = []config.APIKey{
		{Key: opsKey, Tenant: "ops", MaxPriority: "critical"},
		{Key: teamKey, Tenant: "team", MaxPriority: "standard"},
	}
}

// twoSlowWorkers: two workers of cap 1 generating 20 tokens/s.
func twoSlowWorkers() []workerSpec {
	args := []string{"--tokens-per-second", "20", "--ttft-ms", "0"}
	return []workerSpec{{ID: "w-0", Model: "m", Cap: 1, Args: args}, {ID: "w-1", Model: "m", Cap: 1, Args: args}}
}

// streamReq returns a streamed request of n tokens (n/20 s on these workers).
func streamReq(n int, priority string) loadgen.Request {
	return loadgen.Request{Model: "m", MaxTokens: n, Stream: true, Priority: priority}
}

// occupy starts requests holding every worker and waits until they run;
// the i-th takes (i+1)·tokens, so the workers free up one at a time.
func (e *env) occupy(c *loadgen.Client, tokens int) <-chan loadgen.Result {
	e.t.Helper()
	out := make(chan loadgen.Result, len(e.Workers))
	for i := range len(e.Workers) {
		go func() { out <- c.Do(e.ctx, streamReq(tokens*(i+1), ""), time.Now()) }()
	}
	err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
		for id, n := range e.inFlight() {
			if n != 1 {
				return fmt.Errorf("%s has %d in flight", id, n)
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) waitQueued(n int) {
	e.t.Helper()
	if err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
		if w := e.Router.Scheduler().Waiting(); w != n {
			return fmt.Errorf("%d waiting, want %d", w, n)
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// TestCriticalJumpsTheQueue: both workers busy, ten standard requests
// queued, then one critical: the critical one is served next. The waits
// last seconds, through Envoy's ext_proc message timeout.
func TestCriticalJumpsTheQueue(t *testing.T) {
	e := newEnv(t, twoSlowWorkers(), withKeys)
	c := loadgen.NewClient(e.URL, 32, opsKey)
	defer c.Close()
	epoch := time.Now()
	busy := e.occupy(c, 30) // 1.5 s

	type res struct {
		r        loadgen.Result
		critical bool
	}
	results := make(chan res, 11)
	for i := 0; i < 10; i++ {
		go func() { results <- res{c.Do(e.ctx, streamReq(10, "standard"), epoch), false} }()
		e.waitQueued(i + 1)
	}
	go func() { results <- res{c.Do(e.ctx, streamReq(10, "critical"), epoch), true} }()
	e.waitQueued(11)

	var critFirst time.Duration
	var stdFirst []time.Duration
	for i := 0; i < 11; i++ {
		r := <-results
		if !r.r.OK() || r.r.Tokens != 10 {
			t.Fatalf("request failed: %+v", r.r)
		}
		first := r.r.Start + r.r.TTFT
		if r.critical {
			critFirst = first
		} else {
			stdFirst = append(stdFirst, first)
		}
	}
	for i := 0; i < 2; i++ {
		<-busy
	}
	for _, s := range stdFirst {
		if critFirst > s {
			t.Fatalf("critical got its first token at %v, after a standard request queued before it (%v)", critFirst, s)
		}
	}
	last := stats.Percentile(stdFirst, 100)
	t.Logf("critical served at %v; the standard requests from %v to %v", critFirst.Round(time.Millisecond),
		stats.Percentile(stdFirst, 0).Round(time.Millisecond), last.Round(time.Millisecond))
	if last < 3*time.Second {
		t.Fatalf("the last queued request waited only %v: the test did not hold requests for seconds", last)
	}
	e.waitIdle(5 * time.Second)
}

// TestQueueFullAndCriticalAllowance: with the queue full, a standard request
// gets 429 at once while a critical one is still admitted.
func TestQueueFullAndCriticalAllowance(t *testing.T) {
	e := newEnv(t, twoSlowWorkers(), func(c *config.Config) {
		withKeys(c)
		c.Queue.MaxQueueSize = 3
		c.Queue.CriticalMultiplier = 2
	})
	c := loadgen.NewClient(e.URL, 32, opsKey)
	defer c.Close()
	busy := e.occupy(c, 40) // 2 s
	var wg sync.WaitGroup
	queued := make([]loadgen.Result, 3)
	for i := range queued {
		wg.Add(1)
		go func(i int) { defer wg.Done(); queued[i] = c.Do(e.ctx, streamReq(2, "standard"), time.Now()) }(i)
		e.waitQueued(i + 1)
	}
	for i := 0; i < 5; i++ {
		start := time.Now()
		resp, body := e.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2}`,
			map[string]string{"Authorization": "Bearer " + teamKey})
		took := time.Since(start)
		if resp.StatusCode != 429 || !strings.Contains(body, `"code":"queue_full"`) || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("full queue: %d %s", resp.StatusCode, body)
		}
		if took > 50*time.Millisecond {
			t.Fatalf("429 took %v; a full queue must answer at once", took)
		}
	}
	crit := c.Do(e.ctx, streamReq(2, "critical"), time.Now())
	if !crit.OK() {
		t.Fatalf("critical within its allowance refused: %+v", crit)
	}
	wg.Wait()
	for _, r := range queued {
		if !r.OK() {
			t.Fatalf("queued request failed: %+v", r)
		}
	}
	<-busy
	<-busy
	e.waitIdle(5 * time.Second)
}

// TestQueueTimeoutAnd503: a wait past the priority's timeout gets 503 with
// Retry-After.
func TestQueueTimeoutAnd503(t *testing.T) {
	e := newEnv(t, twoSlowWorkers(), func(c *config.Config) { c.Queue.Timeout.Standard = config.Duration(time.Second) })
	c := loadgen.NewClient(e.URL, 8, "")
	defer c.Close()
	busy := e.occupy(c, 60) // 3 s
	start := time.Now()
	resp, body := e.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2}`, nil)
	took := time.Since(start)
	if resp.StatusCode != 503 || !strings.Contains(body, `"code":"queue_timeout"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("want 503 queue_timeout, got %d %s", resp.StatusCode, body)
	}
	if took < time.Second || took > 2500*time.Millisecond {
		t.Fatalf("timed out after %v, want about 1 s", took)
	}
	<-busy
	<-busy
	e.waitIdle(5 * time.Second)
}

// TestAbortWhileQueued: a client that leaves while queued leaves the queue
// at once.
func TestAbortWhileQueued(t *testing.T) {
	e := newEnv(t, twoSlowWorkers(), nil)
	c := loadgen.NewClient(e.URL, 8, "")
	defer c.Close()
	busy := e.occupy(c, 40)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan loadgen.Result, 3)
	for i := 0; i < 3; i++ {
		go func() { done <- c.Do(ctx, streamReq(2, ""), time.Now()) }()
		e.waitQueued(i + 1)
	}
	cancel()
	for i := 0; i < 3; i++ {
		<-done
	}
	e.waitQueued(0)
	if err := stack.WaitFor(e.ctx, 2*time.Second, func() error {
		if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
			return err
		}
		if q := e.Router.Scheduler().Snapshot().Queues; len(q) != 0 {
			return fmt.Errorf("queues %+v", q)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	<-busy
	<-busy
	e.waitIdle(5 * time.Second)
}

// TestKeysAndPriorities: no or wrong key gets 401; a key allowed at most
// standard that asks for critical gets standard; an allowed critical is
// critical.
func TestKeysAndPriorities(t *testing.T) {
	e := newEnv(t, threeWorkers("--tokens-per-second", "0", "--ttft-ms", "0"), withKeys)
	body := `{"model":"model-a","messages":[{"role":"user","content":"x"}],"max_tokens":1}`
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer sk-wrong-key-000"}, {"Authorization": opsKey}} {
		resp, b := e.post("/v1/chat/completions", body, h)
		if resp.StatusCode != 401 || !strings.Contains(b, `"code":"invalid_api_key"`) || resp.Header.Get("x-gpusim-id") != "" {
			t.Fatalf("%v: %d %s", h, resp.StatusCode, b)
		}
		if strings.Contains(b, "sk-") {
			t.Fatalf("the error echoes a key: %s", b)
		}
	}
	for _, tc := range []struct {
		key, asked, want string
	}{
		{teamKey, "critical", "standard"},
		{teamKey, "batch", "batch"},
		{opsKey, "critical", "critical"},
		{opsKey, "", "standard"},
	} {
		id := fmt.Sprintf("prio-%s-%s", tc.key[:7], tc.asked)
		resp, b := e.post("/v1/chat/completions", body, map[string]string{
			"Authorization": "Bearer " + tc.key, "x-llm-priority": tc.asked, "x-request-id": id,
		})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		d, ok := e.Router.Decision(id)
		if !ok || string(d.Priority) != tc.want || d.Tenant == "" {
			t.Fatalf("key %s asking %q: decision %+v, want priority %s", tc.key[:7], tc.asked, d, tc.want)
		}
	}
}

// oneSlotTwoReplicas starts one worker of cap 1 (20 tokens/s) and two
// router replicas on one Redis (key prefix name plus a sequence number),
// each behind its own Envoy, with a client of conns connections to each.
func oneSlotTwoReplicas(t *testing.T, name string, conns int) (a, b *env, ca, cb *loadgen.Client) {
	t.Helper()
	rd := startRedis(t)
	base := startWorkers(t, []workerSpec{{ID: "w-0", Model: "m", Cap: 1, Args: []string{"--tokens-per-second", "20", "--ttft-ms", "0"}}})
	base.Cfg.Redis.URL = "redis://" + rd.Addr + "/0"
	base.Cfg.Redis.KeyPrefix = fmt.Sprintf("%s%d", name, prefixSeq.Add(1))
	a, b = base.replica("replica-a"), base.replica("replica-b")
	a.startFront()
	b.startFront()
	ca, cb = loadgen.NewClient(a.URL, conns, ""), loadgen.NewClient(b.URL, conns, "")
	t.Cleanup(ca.Close)
	t.Cleanup(cb.Close)
	return a, b, ca, cb
}

// occupy sends a streamed request of n tokens through replica a and
// waits until it holds w-0's one slot; its result arrives on the channel.
func occupy(t *testing.T, a *env, ca *loadgen.Client, n int, epoch time.Time) <-chan loadgen.Result {
	t.Helper()
	out := make(chan loadgen.Result, 1)
	go func() { out <- ca.Do(a.ctx, streamReq(n, ""), epoch) }()
	if err := stack.WaitFor(a.ctx, 5*time.Second, func() error {
		if n := a.inFlight()["w-0"]; n != 1 {
			return fmt.Errorf("w-0 in flight %d", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSlotHandedAcrossReplicas: two router replicas, each behind its own
// Envoy, share Redis and one worker of cap 1. A slot freed by the request
// replica A admitted is taken by the request waiting on replica B.
func TestSlotHandedAcrossReplicas(t *testing.T) {
	a, b, ca, cb := oneSlotTwoReplicas(t, "handoff", 4)
	epoch := time.Now()
	first := occupy(t, a, ca, 30, epoch) // 1.5 s on A
	second := make(chan loadgen.Result, 1)
	go func() {
		second <- cb.Do(b.ctx, loadgen.Request{Model: "m", MaxTokens: 2, Stream: true, Body: []byte(
			`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`)}, epoch)
	}()
	b.waitQueued(1)
	r1, r2 := <-first, <-second
	if !r1.OK() || !r2.OK() {
		t.Fatalf("failed: %+v %+v", r1, r2)
	}
	if r2.Start+r2.TTFT < r1.Start+r1.Latency-50*time.Millisecond {
		t.Fatalf("B's request started before A's freed the slot: %v vs %v", r2.Start+r2.TTFT, r1.Start+r1.Latency)
	}
	if r2.Node != "w-0" {
		t.Fatalf("served by %q", r2.Node)
	}
	t.Logf("A's request held w-0 until %v; B's waited and got its first token at %v",
		(r1.Start + r1.Latency).Round(time.Millisecond), (r2.Start + r2.TTFT).Round(time.Millisecond))
	a.waitIdle(5 * time.Second)
	b.waitIdle(5 * time.Second)
}
