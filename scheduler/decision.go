package scheduler

import (
	"cmp"
	"slices"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Decision is the full record of one scheduling decision: what was asked,
// every candidate's terms and total at the live counts the claim saw, who
// won and why the others did not. It answers "why was this slow?".
type Decision struct {
	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	Replica   string    `json:"replica"`
	Model     string    `json:"model"`
	// Adapter is the LoRA adapter the request named (Model is its base).
	Adapter       *AdapterDecision   `json:"adapter,omitempty"`
	Priority      state.Priority     `json:"priority"`
	Tenant        string             `json:"tenant,omitempty"`
	PromptTokens  int                `json:"prompt_tokens_est"`
	MaxTokens     int                `json:"max_tokens"`
	Stream        bool               `json:"stream"`
	SLO           SLO                `json:"slo"`
	Strategy      string             `json:"strategy"`
	Fallback      string             `json:"fallback,omitempty"`
	Outcome       string             `json:"outcome"`
	Worker        string             `json:"worker,omitempty"`
	WaitSeconds   float64            `json:"wait_seconds"`
	QueuePosition int                `json:"queue_position,omitempty"` // where it joined the queue
	DecideMicros  float64            `json:"decide_us"`
	SnapshotAge   float64            `json:"snapshot_age_seconds"`
	Conflict      bool               `json:"conflict,omitempty"`
	Unknown       []string           `json:"unknown_terms,omitempty"`
	Candidates    []scoring.Line     `json:"candidates"`
	Excluded      []scoring.Excluded `json:"excluded,omitempty"`
	// LearnedCaps are the candidates' learned concurrency limits below
	// their configured max_concurrency (adaptive caps): the cap each line
	// shows is the lower one.
	LearnedCaps map[string]int `json:"learned_caps,omitempty"`
	// LearnedTokenCaps are the candidates' learned in-flight token limits
	// (adaptive_caps.token_limits): a candidate past its own is left out.
	LearnedTokenCaps map[string]int64 `json:"learned_token_caps,omitempty"`
	// Prediction is the latency model's for the claimed worker, on the
	// figures the claim was decided on; for a request refused for its
	// objective, the best idle TTFT it was measured against.
	Prediction *Prediction `json:"prediction,omitempty"`
	// Disaggregation is the decider's input and the prefill pick, for
	// models with prefill workers (disagg.go).
	Disaggregation *PrefillDecision `json:"disaggregation,omitempty"`
	// Result is filled in a second record when the request ends.
	Result *Result `json:"result,omitempty"`
}

// Prediction is what the latency model (scoring/latency) predicted.
type Prediction struct {
	TTFTSeconds float64 `json:"ttft_seconds"`
	TPOTSeconds float64 `json:"tpot_seconds,omitempty"`
	// TTFTUnknown and TPOTUnknown: the worker had too little history for
	// the target, so its figure is mostly the prior's.
	TTFTUnknown bool `json:"ttft_unknown,omitempty"`
	TPOTUnknown bool `json:"tpot_unknown,omitempty"`
	// CeilingSeconds is the claimed candidate's ceiling (the most its
	// live TTFT terms could be: the TTFT objective less the model's
	// constant; 0: none).
	CeilingSeconds float64 `json:"ceiling_seconds,omitempty"`
}

// Result is how the request went, as the response phases saw it.
type Result struct {
	Status           int     `json:"status"`
	ServedBy         string  `json:"served_by"` // after any Envoy retry
	LatencySeconds   float64 `json:"latency_seconds"`
	TTFTSeconds      float64 `json:"ttft_seconds,omitempty"`
	TokensPerSecond  float64 `json:"tokens_per_second,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
	Aborted          bool    `json:"aborted,omitempty"`
	// TPOTSeconds is the measured time per output token after the first.
	TPOTSeconds float64 `json:"tpot_seconds,omitempty"`
	// TTFTError and TPOTError are the prediction's absolute relative
	// errors, |predicted − measured| / measured, when both are known.
	TTFTError float64 `json:"ttft_error,omitempty"`
	TPOTError float64 `json:"tpot_error,omitempty"`
}

// Outcomes recorded in Decision.Outcome.
const (
	OutcomeClaimed      = "claimed" // after a wait too: see wait_seconds
	OutcomeAtCapacity   = "at_capacity"
	OutcomeNoHealthy    = "no_healthy_worker"
	OutcomeStoreFailed  = "store_failed"
	OutcomeQueueFull    = "queue_full"
	OutcomeQueueTimeout = "queue_timeout"
	OutcomeShed         = "shed"
	OutcomeAbandoned    = "abandoned" // the client left while queued
	// OutcomeObjectiveUnmet: no worker could take the request within its
	// latency objectives before its TTFT objective became unreachable.
	OutcomeObjectiveUnmet = "objective_unmet"
)

// Recorder keeps decisions for explain.
type Recorder interface {
	Record(d *Decision)
}

// logDecision writes the decision as one structured line. With more than
// top candidates (top > 0), the line carries the top best by total (the
// winner among them) and the count of the rest; the full breakdown stays in
// the decision record that explain serves. Encoding 64 candidates' terms on
// every request would cost more than the decision itself.
func logDecision(log *zap.Logger, d *Decision, top int) {
	ce := log.Check(zap.InfoLevel, "decision")
	if ce == nil {
		return
	}
	cands := d.Candidates
	if top > 0 && len(cands) > top {
		cands = bestLines(cands, top)
	}
	ce.Write(
		zap.String("request_id", d.RequestID),
		zap.String("model", d.Model),
		zap.String("priority", string(d.Priority)),
		zap.String("tenant", d.Tenant),
		zap.Object("slo", sloLog(d.SLO)),
		zap.String("strategy", d.Strategy),
		zap.String("fallback", d.Fallback),
		zap.String("outcome", d.Outcome),
		zap.String("worker", d.Worker),
		zap.Float64("wait_seconds", d.WaitSeconds),
		zap.Int("queue_position", d.QueuePosition),
		zap.Float64("decide_us", d.DecideMicros),
		zap.Float64("snapshot_age_seconds", d.SnapshotAge),
		zap.Bool("conflict", d.Conflict),
		zap.Strings("unknown_terms", d.Unknown),
		zap.Int("candidates_total", len(d.Candidates)),
		zap.Array("candidates", lines(cands)),
		zap.Array("excluded", excluded(d.Excluded)),
		zap.Object("learned_caps", learned[int](d.LearnedCaps)),
		zap.Object("learned_token_caps", learned[int64](d.LearnedTokenCaps)),
		predictionField(d.Prediction),
		adapterField(d.Adapter),
		disaggregationField(d.Disaggregation),
	)
}

// predictionField logs the prediction when there is one.
func predictionField(p *Prediction) zap.Field {
	if p == nil {
		return zap.Skip()
	}
	return zap.Object("prediction", (*predictionLog)(p))
}

type predictionLog Prediction

func (p *predictionLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddFloat64("ttft_seconds", p.TTFTSeconds)
	enc.AddFloat64("tpot_seconds", p.TPOTSeconds)
	if p.TTFTUnknown {
		enc.AddBool("ttft_unknown", true)
	}
	if p.TPOTUnknown {
		enc.AddBool("tpot_unknown", true)
	}
	if p.CeilingSeconds != 0 {
		enc.AddFloat64("ceiling_seconds", p.CeilingSeconds)
	}
	return nil
}

type sloLog SLO

func (s sloLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddFloat64("ttft_seconds", s.TTFT.Seconds)
	enc.AddString("ttft_source", string(s.TTFT.Source))
	enc.AddFloat64("tpot_seconds", s.TPOT.Seconds)
	enc.AddString("tpot_source", string(s.TPOT.Source))
	return nil
}

type lines []scoring.Line

func (ls lines) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, l := range ls {
		if err := enc.AppendObject(line(l)); err != nil {
			return err
		}
	}
	return nil
}

type line scoring.Line

func (l line) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("worker", l.Worker)
	enc.AddInt("active", l.Active)
	enc.AddInt("cap", l.Cap)
	if l.Full {
		enc.AddBool("full", true)
	}
	enc.AddFloat64("total", l.Total)
	if l.Adapter != "" {
		enc.AddString("adapter_state", l.Adapter)
	}
	return enc.AddObject("terms", terms(l))
}

// terms logs the live active count first, then every other term.
type terms scoring.Line

func (l terms) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if l.ActiveWeight != 0 {
		enc.AddInt("active", l.Active)
	}
	if l.LoadFactor != 0 {
		enc.AddFloat64("load_factor", l.LoadFactor)
	}
	for _, t := range l.Terms {
		if t.Unknown {
			enc.AddString(t.Name, "unknown")
			continue
		}
		enc.AddFloat64(t.Name, t.Value)
	}
	return nil
}

type excluded []scoring.Excluded

func (es excluded) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, e := range es {
		enc.AppendString(e.Worker + ":" + e.Reason)
	}
	return nil
}

// bestLines returns the n lines with the lowest totals, in ascending order.
func bestLines(ls []scoring.Line, n int) []scoring.Line {
	idx := make([]int, len(ls))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(ls[a].Total, ls[b].Total) })
	out := make([]scoring.Line, n)
	for i := range out {
		out[i] = ls[idx[i]]
	}
	return out
}
