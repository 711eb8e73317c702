package decisions

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/test/stack"
)

// startRedis starts a redis-server for one test (skipped with -short).
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv, err := stack.StartRedis(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(2 * time.Second) })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// heldPipeline is a Redis round trip that takes as long as the test wants:
// each pipeline of XADDs signals started, then waits for release's answer
// (nil: go on to Redis). Other commands pass.
type heldPipeline struct {
	started chan struct{}
	release chan error
}

var _ redis.Hook = (*heldPipeline)(nil)

func newHeldPipeline() *heldPipeline {
	return &heldPipeline{started: make(chan struct{}, 1), release: make(chan error)}
}

func (h *heldPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *heldPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *heldPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "xadd" { // the connection's own setup
			return next(ctx, cmds)
		}
		h.started <- struct{}{}
		if err := <-h.release; err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

func ids(ds []*scheduler.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.RequestID
	}
	return out
}

func waitOrFail[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// TestRecordDoesNotWaitForAFlush: Record is what the scheduler calls on
// the request path; it returns while a flush's round trip to Redis hangs,
// its queue keeps the newest 10000 unwritten decisions, and a failed flush
// puts its batch back in front of them, in order.
func TestRecordDoesNotWaitForAFlush(t *testing.T) {
	addr, err := stack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: addr}) // never reached: the hook answers
	defer client.Close()
	held := newHeldPipeline()
	client.AddHook(held)
	s := NewStream(client, "p:", 1000, nil)
	var flushes []error
	s.OnFlush = func(err error) { flushes = append(flushes, err) }

	s.Record(dec("first", 0))
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(context.Background()) }()
	waitOrFail(t, held.started, "the flush's round trip")

	const n = 12000
	recorded := make(chan struct{})
	go func() {
		for i := range n {
			s.Record(dec(fmt.Sprint(i), i))
		}
		close(recorded)
	}()
	waitOrFail(t, recorded, fmt.Sprintf("%d records while a flush hangs", n))
	select {
	case err := <-flushed:
		t.Fatalf("the flush ended (%v) before its round trip did: the test tested nothing", err)
	default:
	}

	held.release <- errors.New("i/o timeout")
	if err := waitOrFail(t, flushed, "the flush"); err == nil || err.Error() != "write decisions: i/o timeout" {
		t.Fatalf("flush: %v", err)
	}
	if len(flushes) != 1 || flushes[0] == nil {
		t.Fatalf("OnFlush calls %v, want one with the error", flushes)
	}
	got := ids(s.pending)
	if len(got) != 1+10000 || got[0] != "first" || got[1] != fmt.Sprint(n-10000) || got[len(got)-1] != fmt.Sprint(n-1) {
		t.Fatalf("queue after the failed flush: %d decisions, %v ... %v; want first, then %d..%d",
			len(got), got[:min(3, len(got))], got[max(0, len(got)-2):], n-10000, n-1)
	}
	for i := 2; i < len(got); i++ {
		if got[i] != fmt.Sprint(n-10000+i-1) {
			t.Fatalf("queue out of order at %d: %s", i, got[i])
		}
	}
}

// TestFlushWritesInRecordOrder: one flush is one round trip that appends
// the queued decisions in the order they were recorded; a flush that
// failed is retried by the next, still in order.
func TestFlushWritesInRecordOrder(t *testing.T) {
	client := startRedis(t)
	held := newHeldPipeline()
	client.AddHook(held)
	s := NewStream(client, "p:", 1000, nil)
	var flushes atomic.Int64
	s.OnFlush = func(error) { flushes.Add(1) }
	ctx := context.Background()

	flush := func(answer error) error {
		done := make(chan error, 1)
		go func() { done <- s.Flush(ctx) }()
		waitOrFail(t, held.started, "a round trip")
		held.release <- answer
		return waitOrFail(t, done, "the flush")
	}
	for i := range 3 {
		s.Record(dec(fmt.Sprintf("a%d", i), i))
	}
	if err := flush(errors.New("connection reset")); err == nil {
		t.Fatal("a failed round trip flushed")
	}
	for i := range 3 {
		s.Record(dec(fmt.Sprintf("b%d", i), i))
	}
	if err := flush(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil || flushes.Load() != 2 {
		t.Fatalf("an empty queue: flush %v, %d round trips; want none", err, flushes.Load())
	}
	msgs, err := client.XRange(ctx, "p:decisions", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Values["id"].(string))
	}
	if want := []string{"a0", "a1", "a2", "b0", "b1", "b2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream holds %v, want %v", got, want)
	}
}

// TestStreamGet: any replica finds a decision by request id, the newest
// when a client reused the id, past the first page of the scan, and not
// once the stream was trimmed past it.
func TestStreamGet(t *testing.T) {
	client := startRedis(t)
	ctx := context.Background()
	s := NewStream(client, "p:", 10000, nil)
	s.Record(&scheduler.Decision{RequestID: "reused", Worker: "w-old"})
	for i := range 1200 { // the scan reads 500 at a time from the newest
		s.Record(dec(fmt.Sprint(i), i))
	}
	s.Record(&scheduler.Decision{RequestID: "reused", Worker: "w-new"})
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	other := NewStream(client, "p:", 10000, nil) // another replica
	for _, tc := range []struct {
		id      string
		want    string // the decision's Worker or MaxTokens
		wantErr error
	}{
		{"reused", "w-new", nil},
		{"1199", "1199", nil},
		{"0", "0", nil},
		{"nope", "", ErrNotFound},
	} {
		d, err := other.Get(ctx, tc.id)
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("Get(%s): %v, want %v", tc.id, err, tc.wantErr)
		}
		if err == nil && d.Worker != tc.want && fmt.Sprint(d.MaxTokens) != tc.want {
			t.Fatalf("Get(%s) = %+v, want %s", tc.id, d, tc.want)
		}
	}

	// Trimmed to about 100 entries: the oldest are gone.
	small := NewStream(client, "q:", 100, nil)
	for i := range 1000 {
		small.Record(dec(fmt.Sprint(i), i))
	}
	if err := small.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := client.XLen(ctx, "q:decisions").Result(); n < 100 || n >= 1000 {
		t.Fatalf("stream of max 100 holds %d entries", n)
	}
	if _, err := small.Get(ctx, "0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a trimmed decision: %v, want ErrNotFound", err)
	}
	if d, err := small.Get(ctx, "999"); err != nil || d.MaxTokens != 999 {
		t.Fatalf("the newest: %v %v", d, err)
	}

	// Redis unreachable: an error that is not "not found".
	_ = client.Close()
	if _, err := other.Get(ctx, "0"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("closed client: %v, want a read error", err)
	}
}

// TestRunFlushesAndStops: Run flushes on its ticker, flushes what is left
// when its context ends, returns, and leaves no goroutine behind.
func TestRunFlushesAndStops(t *testing.T) {
	client := startRedis(t)
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil { // the pool's connection, before counting
		t.Fatal(err)
	}
	s := NewStream(client, "p:", 1000, nil)
	before := runtime.NumGoroutine()
	for _, every := range []time.Duration{20 * time.Millisecond, time.Hour} {
		s.Record(dec(fmt.Sprint(every), 0))
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Run(runCtx, every); close(done) }()
		if every < time.Second { // the ticker flushes
			if err := stack.WaitFor(ctx, 10*time.Second, func() error {
				if _, err := s.Get(ctx, fmt.Sprint(every)); err != nil {
					return err
				}
				return nil
			}); err != nil {
				t.Fatalf("not flushed by Run's ticker: %v", err)
			}
		}
		cancel()
		waitOrFail(t, done, "Run to return after its context ended")
		// With an hour's ticker, only the last flush wrote it.
		if _, err := s.Get(ctx, fmt.Sprint(every)); err != nil {
			t.Fatalf("every %v: not written by the time Run returned: %v", every, err)
		}
	}
	if err := stack.WaitFor(ctx, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before Run", n, before)
		}
		return nil
	}); err != nil {
		buf := make([]byte, 1<<16)
		t.Fatalf("%v\n%s", err, buf[:runtime.Stack(buf, true)])
	}
}

// TestExplainerFallsBackToTheStream: a decision this replica did not make
// is read from the shared stream; one it made comes from its ring even
// when the stream has it too.
func TestExplainerFallsBackToTheStream(t *testing.T) {
	client := startRedis(t)
	ctx := context.Background()
	mine, theirs := NewRing(4), NewStream(client, "p:", 100, nil)
	mine.Record(&scheduler.Decision{RequestID: "both", Replica: "me"})
	theirs.Record(&scheduler.Decision{RequestID: "both", Replica: "other"})
	theirs.Record(&scheduler.Decision{RequestID: "remote", Replica: "other"})
	if err := theirs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e := NewExplainer(mine, NewStream(client, "p:", 100, nil))
	for id, want := range map[string]string{"both": "me", "remote": "other"} {
		if d, err := e.Explain(ctx, id); err != nil || d.Replica != want {
			t.Fatalf("Explain(%s) = %v, %v; want replica %s's", id, d, err, want)
		}
	}
	if _, err := e.Explain(ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestFanoutRecordsToEach: every recorder of a Fanout gets each decision.
func TestFanoutRecordsToEach(t *testing.T) {
	a, b := NewRing(2), NewRing(2)
	Fanout{a, b}.Record(dec("x", 1))
	for i, r := range []*Ring{a, b} {
		if _, ok := r.Get("x"); !ok {
			t.Fatalf("recorder %d did not get the decision", i)
		}
	}
}
