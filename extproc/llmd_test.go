package extproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// keyAuth accepts any Authorization as the identity it holds.
type keyAuth struct{ id Identity }

func (k keyAuth) Authenticate(string) (Identity, error) { return k.id, nil }

func runWith(t *testing.T, sched Scheduler, opts Options) *fakeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := newFakeStream(ctx)
	opts.ClusterFor = func(w, m string) string { return w + ".via." + m }
	opts.MaxBodyBytes = 1 << 20
	srv := New(sched, opts)
	go func() {
		_ = srv.Process(st)
		close(st.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-st.done
	})
	return st
}

// An objective names a priority, never above the key's maximum; the
// router's own header wins; an objective not configured is ignored.
func TestObjectivePriorityBoundedByKey(t *testing.T) {
	objectives := map[string]state.Priority{"premium": state.PriorityCritical, "bulk": state.PriorityBatch}
	for _, tc := range []struct {
		name    string
		max     state.Priority
		headers []string
		want    state.Priority
	}{
		{"objective within the key", state.PriorityCritical, []string{headerObjective, "premium"}, state.PriorityCritical},
		{"objective clamped to the key", state.PriorityStandard, []string{headerObjective, "premium"}, state.PriorityStandard},
		{"lower objective", state.PriorityCritical, []string{headerObjective, "bulk"}, state.PriorityBatch},
		{"deprecated alias", state.PriorityCritical, []string{headerObjectiveAlias, "bulk"}, state.PriorityBatch},
		{"current name wins over alias", state.PriorityCritical, []string{headerObjectiveAlias, "bulk", headerObjective, "premium"}, state.PriorityCritical},
		{"unknown objective ignored", state.PriorityCritical, []string{headerObjective, "gold"}, state.PriorityStandard},
		{"x-llm-priority wins", state.PriorityCritical, []string{headerObjective, "premium", headerPriority, "batch"}, state.PriorityBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := &fakeScheduler{worker: "w1"}
			st := runWith(t, sched, Options{Auth: keyAuth{Identity{Tenant: "t", MaxPriority: tc.max}}, Objectives: objectives})
			h := append([]string{":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer k"}, tc.headers...)
			st.roundTrip(t, reqHeaders(false, h...))
			st.roundTrip(t, reqBody(`{"model":"m","messages":[]}`))
			if got := sched.lastReq.Priority; got != tc.want {
				t.Fatalf("priority %q, want %q", got, tc.want)
			}
		})
	}
}

// The rewrite names the model the scheduler routes and the worker receives.
func TestModelNameRewrite(t *testing.T) {
	sched := &fakeScheduler{worker: "w1"}
	st := runWith(t, sched, Options{})
	st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", headerRewrite, "m-lora"))
	r := st.roundTrip(t, reqBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if sched.lastReq.Model != "m-lora" {
		t.Fatalf("scheduler routed %q", sched.lastReq.Model)
	}
	common := r.GetRequestBody().GetResponse()
	body := common.GetBodyMutation().GetBody()
	if got := gjson.GetBytes(body, "model").String(); got != "m-lora" {
		t.Fatalf("worker gets model %q (%s)", got, body)
	}
	if gjson.GetBytes(body, "messages.0.content").String() != "hi" {
		t.Fatalf("rewrite lost the rest of the body: %s", body)
	}
	if setHeaders(common.GetHeaderMutation())["content-length"] == "" {
		t.Fatal("no content-length for the rewritten body")
	}
}

// A session's requests share leading blocks, scoped to the tenant.
func TestSessionBlocks(t *testing.T) {
	prompt := []uint64{7, 8}
	a := sessionBlocks("t1", "s1", prompt)
	if len(a) != sessionBlockCount+len(prompt) || !slices.Equal(a[sessionBlockCount:], prompt) {
		t.Fatalf("blocks %v", a)
	}
	if b := sessionBlocks("t1", "s1", nil); !slices.Equal(b, a[:sessionBlockCount]) {
		t.Fatal("the same session must give the same blocks")
	}
	if c := sessionBlocks("t2", "s1", nil); slices.Equal(c, a[:sessionBlockCount]) {
		t.Fatal("another tenant's session of the same id must not match")
	}
	if d := sessionBlocks("t1", "", prompt); !slices.Equal(d, prompt) {
		t.Fatal("no session, no change")
	}
}

// Every 429 and 503 the router generates says why, in llm-d's words.
func TestDroppedReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{scheduler.ErrAtCapacity, "rejected-saturated"},
		{scheduler.ErrQueueFull, "rejected-saturated"},
		{scheduler.ErrQueueTimeout, "rejected-ttl-expired"},
		{scheduler.ErrObjectiveUnmet, "rejected-saturated"},
		{scheduler.ErrNoHealthyWorker, "rejected-no-healthy-worker"},
		{fmt.Errorf("sql on w0: %w: engine said no", scheduler.ErrAdapterLoad), "rejected-adapter-load-failed"},
		{ErrUnavailable, "rejected-shutting-down"},
		{errors.New("boom"), ""},
	} {
		sched := &fakeScheduler{err: tc.err}
		st := runWith(t, sched, Options{})
		st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", headerSession, "s"))
		r := st.roundTrip(t, reqBody(`{"model":"m","messages":[]}`))
		im := r.GetImmediateResponse()
		if got := setHeaders(im.GetHeaders())[headerDropped]; got != tc.want {
			t.Errorf("%v (status %d): %s %q, want %q", tc.err, im.GetStatus().GetCode(), headerDropped, got, tc.want)
		}
	}
}
