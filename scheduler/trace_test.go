package scheduler

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestDecisionAttributesCarryEveryCandidate(t *testing.T) {
	d := &Decision{
		Strategy: "scored", Outcome: OutcomeClaimed, Worker: "b", WaitSeconds: 0.25, QueuePosition: 2,
		Conflict: true, Unknown: []string{"gpu_util"},
		Candidates: []scoring.Line{
			{Worker: "a", Active: 2, Cap: 2, Full: true, Total: 300, Terms: []scoring.Term{{Name: "queue", Value: 1}, {Name: "gpu_util", Unknown: true}}},
			{Worker: "b", Active: 1, Cap: 4, Total: 112.5, Terms: []scoring.Term{{Name: "queue", Value: 0.5}}},
		},
		Excluded:   []scoring.Excluded{{Worker: "c", Reason: "draining"}},
		Prediction: &Prediction{TTFTSeconds: 0.4},
	}
	got := attrs(decisionAttributes(d))
	checks := []struct {
		key  attribute.Key
		want attribute.Value
	}{
		{AttrOutcome, attribute.StringValue("claimed")},
		{AttrWorker, attribute.StringValue("b")},
		{AttrStrategy, attribute.StringValue("scored")},
		{AttrWaitSeconds, attribute.Float64Value(0.25)},
		{AttrQueuePosition, attribute.IntValue(2)},
		{AttrConflict, attribute.BoolValue(true)},
		{AttrUnknownTerms, attribute.StringSliceValue([]string{"gpu_util"})},
		{AttrCandidateWorker, attribute.StringSliceValue([]string{"a", "b"})},
		{AttrCandidateScore, attribute.Float64SliceValue([]float64{300, 112.5})},
		{AttrCandidateActive, attribute.IntSliceValue([]int{2, 1})},
		{AttrCandidateCap, attribute.IntSliceValue([]int{2, 4})},
		{AttrCandidateFull, attribute.BoolSliceValue([]bool{true, false})},
		{AttrCandidateTerms, attribute.StringSliceValue([]string{"queue=1 gpu_util=unknown", "queue=0.5"})},
		{AttrExcluded, attribute.StringSliceValue([]string{"c:draining"})},
		{AttrPredictedTTFT, attribute.Float64Value(0.4)},
	}
	for _, c := range checks {
		if v, ok := got[c.key]; !ok || v.String() != c.want.String() {
			t.Errorf("%s = %q, want %q", c.key, v.String(), c.want.String())
		}
	}
	// A refusal names no worker and no prediction.
	got = attrs(decisionAttributes(&Decision{Outcome: OutcomeQueueFull}))
	for _, k := range []attribute.Key{AttrWorker, AttrQueuePosition, AttrPredictedTTFT, AttrConflict} {
		if _, ok := got[k]; ok {
			t.Errorf("refusal carries %s", k)
		}
	}
}

func TestReleaseAttributesUseGenAIUsage(t *testing.T) {
	got := attrs(releaseAttributes("w", Outcome{Status: 200, CompletionTokens: 17, TTFT: 300 * time.Millisecond, TokensPerSec: 40}, 1.5))
	if got["gen_ai.usage.output_tokens"].AsInt64() != 17 || got["http.response.status_code"].AsInt64() != 200 ||
		got[AttrReleaseWorker].AsString() != "w" || got[AttrReleaseTTFT].AsFloat64() != 0.3 || got[AttrReleaseLatency].AsFloat64() != 1.5 {
		t.Fatalf("release attributes: %v", got)
	}
	if _, ok := attrs(releaseAttributes("w", Outcome{Aborted: true}, 0.1))["gen_ai.usage.output_tokens"]; ok {
		t.Fatal("an aborted request with no tokens reports output tokens")
	}
}

// tracedScheduler is a scheduler with a queue whose spans go to the
// returned recorder.
func tracedScheduler(t *testing.T, specs ...state.WorkerSpec) (*Scheduler, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	store := memory.New(nil, state.Limits{})
	if err := store.Register(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, err := New(store, Options{
		Strategy:  "scored",
		Params:    scoring.Params{Weights: scoring.Weights{Active: 100, Terms: scoring.DefaultTermWeights()}, JobCostScale: 10 * time.Second},
		ReplicaID: "test",
		Queue:     QueueOptions{MaxSize: 4, Timeouts: [3]time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, PollEvery: 20 * time.Millisecond},
		Tracer:    tp.Tracer("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, rec, tp
}

func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// A claimed request, a queued one and both releases: each span is a child
// of the right one, and the decision's attributes name the picked worker.
func TestAdmitTracesTheDecisionClaimQueueAndRelease(t *testing.T) {
	s, rec, tp := tracedScheduler(t, spec("a", "m", 1))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")

	first, err := s.Admit(ctx, Request{ID: "r1", Model: "m", MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Ticket, 1)
	go func() {
		t2, err := s.Admit(ctx, Request{ID: "r2", Model: "m"})
		if err != nil {
			t.Error(err)
		}
		done <- t2
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling for the second request to queue
	}
	first.Finish(Outcome{Status: 200, CompletionTokens: 3})
	second := <-done
	if second == nil {
		t.FailNow()
	}
	second.Finish(Outcome{Status: 200})
	request.End()

	spans := rec.Ended()
	decides := spansNamed(spans, SpanDecide)
	claims := spansNamed(spans, SpanClaim)
	queues := spansNamed(spans, SpanQueue)
	releases := spansNamed(spans, SpanRelease)
	if len(decides) != 2 || len(claims) != 2 || len(queues) != 1 || len(releases) != 2 {
		t.Fatalf("spans: %d decide, %d claim, %d queue, %d release", len(decides), len(claims), len(queues), len(releases))
	}
	reqSC := request.SpanContext()
	for _, sp := range slices.Concat(decides, releases) {
		if sp.Parent().SpanID() != reqSC.SpanID() || sp.SpanContext().TraceID() != reqSC.TraceID() {
			t.Errorf("%s is not a child of the request span", sp.Name())
		}
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, d := range decides {
		byID[attrs(d.Attributes())[AttrRequestID].AsString()] = d
	}
	for _, c := range claims {
		if c.Parent().SpanID() != byID["r1"].SpanContext().SpanID() && c.Parent().SpanID() != byID["r2"].SpanContext().SpanID() {
			t.Errorf("claim span's parent is no decide span")
		}
	}
	if queues[0].Parent().SpanID() != byID["r2"].SpanContext().SpanID() {
		t.Error("the queue span is not the queued request's decide span's child")
	}
	a1 := attrs(byID["r1"].Attributes())
	if a1[AttrWorker].AsString() != "a" || a1[AttrOutcome].AsString() != OutcomeClaimed || a1["gen_ai.request.model"].AsString() != "m" ||
		a1["gen_ai.request.max_tokens"].AsInt64() != 16 || len(a1[AttrCandidateWorker].AsStringSlice()) != 1 {
		t.Errorf("first decision's attributes: %v", a1)
	}
	a2 := attrs(byID["r2"].Attributes())
	if a2[AttrWorker].AsString() != "a" || a2[AttrWaitSeconds].AsFloat64() <= 0 || a2[AttrQueuePosition].AsInt64() != 1 {
		t.Errorf("queued decision's attributes: %v", a2)
	}
}

// With no tracer, Admit makes no span and leaves the caller's alone.
func TestAdmitWithoutTracerMakesNoSpan(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 1))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	tk, err := s.Admit(ctx, Request{ID: "r", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(Outcome{Status: 200})
	if n := len(rec.Ended()); n != 0 || !request.IsRecording() {
		t.Fatalf("%d spans ended, request span recording %v", n, request.IsRecording())
	}
}

// Under a request span that is not sampled the scheduler makes no span:
// with the router's samplers (by trace id) none would be recorded.
func TestAdmitUnderAnUnsampledSpanMakesNone(t *testing.T) {
	s, rec, _ := tracedScheduler(t, spec("a", "m", 1))
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0)))
	ctx, request := unsampled.Tracer("test").Start(context.Background(), "request")
	if !request.SpanContext().IsValid() || request.IsRecording() {
		t.Fatal("the test needs a valid span that is not recorded")
	}
	tk, err := s.Admit(ctx, Request{ID: "r", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(Outcome{Status: 200})
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans under an unsampled request", n)
	}
}
