package scheduler

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// The scheduler's spans, children of the caller's span in Admit's context.
// They use the OpenTelemetry API only: the SDK, its sampler and exporters
// are internal/tracing's, and Options.Tracer nil makes none.
const (
	// SpanDecide covers Admit: the plan, the claim, any wait in the
	// queue; it carries the decision record (decisionAttributes).
	SpanDecide = "llm_router.decide"
	// SpanClaim is the store's atomic claim (one round trip).
	SpanClaim = "llm_router.claim"
	// SpanQueue is the wait of a queued request, until a worker is handed
	// to it or it leaves.
	SpanQueue = "llm_router.queue"
	// SpanRelease is the release of the claim, when the request ends.
	SpanRelease = "llm_router.release"
)

// Attribute keys of the router's own, beside the GenAI semantic
// conventions' (gen_ai.*). Candidates are parallel arrays, one entry per
// candidate in the order the decision lists them.
const (
	AttrRequestID         = attribute.Key("llm_router.request.id")
	AttrPromptTokens      = attribute.Key("llm_router.request.prompt_tokens_estimate")
	AttrPriority          = attribute.Key("llm_router.request.priority")
	AttrTenant            = attribute.Key("llm_router.request.tenant")
	AttrStrategy          = attribute.Key("llm_router.decision.strategy")
	AttrFallback          = attribute.Key("llm_router.decision.fallback")
	AttrOutcome           = attribute.Key("llm_router.decision.outcome")
	AttrWorker            = attribute.Key("llm_router.decision.worker")
	AttrWaitSeconds       = attribute.Key("llm_router.decision.wait_seconds")
	AttrQueuePosition     = attribute.Key("llm_router.decision.queue_position")
	AttrSnapshotAge       = attribute.Key("llm_router.decision.snapshot_age_seconds")
	AttrConflict          = attribute.Key("llm_router.decision.conflict")
	AttrUnknownTerms      = attribute.Key("llm_router.decision.unknown_terms")
	AttrPredictedTTFT     = attribute.Key("llm_router.decision.predicted_ttft_seconds")
	AttrPredictedTPOT     = attribute.Key("llm_router.decision.predicted_tpot_seconds")
	AttrCandidateWorker   = attribute.Key("llm_router.candidates.worker")
	AttrCandidateScore    = attribute.Key("llm_router.candidates.score")
	AttrCandidateActive   = attribute.Key("llm_router.candidates.active")
	AttrCandidateCap      = attribute.Key("llm_router.candidates.cap")
	AttrCandidateFull     = attribute.Key("llm_router.candidates.full")
	AttrCandidateTerms    = attribute.Key("llm_router.candidates.terms")
	AttrExcluded          = attribute.Key("llm_router.decision.excluded")
	AttrClaimIndex        = attribute.Key("llm_router.claim.index")
	AttrReleaseWorker     = attribute.Key("llm_router.release.worker")
	AttrReleaseLatency    = attribute.Key("llm_router.release.latency_seconds")
	AttrReleaseAborted    = attribute.Key("llm_router.release.aborted")
	AttrReleaseFailed     = attribute.Key("llm_router.release.upstream_failure")
	AttrReleaseTTFT       = attribute.Key("llm_router.release.ttft_seconds")
	AttrReleaseTokensRate = attribute.Key("llm_router.release.tokens_per_second")
)

// startSpan starts a child span of ctx's, or, with tracing off or under a
// span that is not recorded, returns ctx and a span that records nothing
// (never ctx's own span: ending that is its owner's business). The
// router's samplers decide by trace id, so the child of a span not
// sampled would not be sampled either: skipping it saves its cost.
func (s *Scheduler) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s.opts.Tracer == nil {
		return ctx, noop.Span{}
	}
	if p := trace.SpanFromContext(ctx); p.SpanContext().IsValid() && !p.IsRecording() {
		return ctx, noop.Span{}
	}
	return s.opts.Tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// requestAttributes describe what was asked, known before the decision.
func requestAttributes(r Request) []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrRequestID.String(r.ID),
		semconv.GenAIRequestModel(r.Model),
		semconv.GenAIRequestMaxTokens(r.MaxTokens),
		AttrPromptTokens.Int(r.PromptTokens),
		AttrPriority.String(string(r.Priority.OrStandard())),
		AttrTenant.String(r.Tenant),
	}
}

// decisionAttributes are a decision record as span attributes: its
// outcome, the picked worker, the wait, and every candidate's score
// (total), live in-flight count, cap and terms.
func decisionAttributes(d *Decision) []attribute.KeyValue {
	n := len(d.Candidates)
	workers, terms := make([]string, n), make([]string, n)
	scores := make([]float64, n)
	active, caps := make([]int, n), make([]int, n)
	full := make([]bool, n)
	for i, l := range d.Candidates {
		workers[i], scores[i], active[i], caps[i], full[i] = l.Worker, l.Total, l.Active, l.Cap, l.Full
		terms[i] = termsString(l.Terms)
	}
	out := []attribute.KeyValue{
		AttrStrategy.String(d.Strategy),
		AttrOutcome.String(d.Outcome),
		AttrWaitSeconds.Float64(d.WaitSeconds),
		AttrSnapshotAge.Float64(d.SnapshotAge),
		AttrCandidateWorker.StringSlice(workers),
		AttrCandidateScore.Float64Slice(scores),
		AttrCandidateActive.IntSlice(active),
		AttrCandidateCap.IntSlice(caps),
		AttrCandidateFull.BoolSlice(full),
		AttrCandidateTerms.StringSlice(terms),
	}
	if d.Worker != "" {
		out = append(out, AttrWorker.String(d.Worker))
	}
	if d.Fallback != "" {
		out = append(out, AttrFallback.String(d.Fallback))
	}
	if d.QueuePosition > 0 {
		out = append(out, AttrQueuePosition.Int(d.QueuePosition))
	}
	if d.Conflict {
		out = append(out, AttrConflict.Bool(true))
	}
	if len(d.Unknown) > 0 {
		out = append(out, AttrUnknownTerms.StringSlice(d.Unknown))
	}
	if len(d.Excluded) > 0 {
		ex := make([]string, len(d.Excluded))
		for i, e := range d.Excluded {
			ex[i] = e.Worker + ":" + e.Reason
		}
		out = append(out, AttrExcluded.StringSlice(ex))
	}
	if p := d.Prediction; p != nil {
		out = append(out, AttrPredictedTTFT.Float64(p.TTFTSeconds))
		if p.TPOTSeconds > 0 {
			out = append(out, AttrPredictedTPOT.Float64(p.TPOTSeconds))
		}
	}
	return out
}

// termsString writes a candidate's terms as name=value pairs, as the
// decision log does; an unknown term reads "unknown".
func termsString(ts []scoring.Term) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Name)
		b.WriteByte('=')
		if t.Unknown {
			b.WriteString("unknown")
			continue
		}
		b.WriteString(strconv.FormatFloat(t.Value, 'g', 6, 64))
	}
	return b.String()
}

// traceDecision annotates the decide span with the decision d (nil when
// Admit refused before deciding) and its error.
func traceDecision(span trace.Span, d *Decision, err error) {
	if !span.IsRecording() {
		return
	}
	if d != nil {
		span.SetAttributes(decisionAttributes(d)...)
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
}

// releaseAttributes describe how the request ended, as the release
// records it.
func releaseAttributes(worker string, o Outcome, elapsed float64) []attribute.KeyValue {
	out := []attribute.KeyValue{
		AttrReleaseWorker.String(worker),
		semconv.HTTPResponseStatusCode(o.Status),
		AttrReleaseLatency.Float64(elapsed),
		AttrReleaseAborted.Bool(o.Aborted),
		AttrReleaseFailed.Bool(o.UpstreamFailure),
	}
	if o.TTFT > 0 {
		out = append(out, AttrReleaseTTFT.Float64(o.TTFT.Seconds()))
	}
	if o.TokensPerSec > 0 {
		out = append(out, AttrReleaseTokensRate.Float64(o.TokensPerSec))
	}
	if o.CompletionTokens > 0 {
		out = append(out, semconv.GenAIUsageOutputTokens(o.CompletionTokens))
	}
	return out
}

// traceClaim ends the claim span with what the store answered.
func traceClaim(span trace.Span, res state.ClaimResult, err error) {
	if span.IsRecording() {
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case res.Index >= 0:
			span.SetAttributes(AttrClaimIndex.Int(res.Index))
		case res.Queued:
			span.SetAttributes(AttrQueuePosition.Int(res.Position))
		}
	}
	span.End()
}

// releaseSpan starts the release span, a child of parent (none when
// parent is not sampled: tracing off, or the request not recorded).
func (s *Scheduler) releaseSpan(ctx context.Context, parent trace.SpanContext, worker string, o Outcome, elapsed time.Duration) (context.Context, trace.Span) {
	if s.opts.Tracer == nil || !parent.IsSampled() {
		return ctx, noop.Span{}
	}
	// Not startSpan: the parent here is a span context, never recording.
	return s.opts.Tracer.Start(trace.ContextWithSpanContext(ctx, parent), SpanRelease,
		trace.WithAttributes(releaseAttributes(worker, o, elapsed.Seconds())...))
}
