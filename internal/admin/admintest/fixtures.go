package admintest

import (
	"time"

	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// At is the fixed time of the typical fleet's samples and decision, so
// what is rendered from them does not move.
var At = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// RequestID is the request the typical fleet's decision log explains.
const RequestID = "req-7f3a"

// Lease is what the typical fleet's registered worker has left of its
// lease whenever it is read (its agent heartbeats).
const Lease = 30 * time.Second

// TypicalFleet is a small fleet as a router under load shows it: two
// workers from the config file (one busy with telemetry and a learned
// limit, one unhealthy), one registered by an agent, a queue, and the
// decision for RequestID with its candidates, an exclusion and a result.
func TypicalFleet() *Fleet {
	ema := func(v float64, n int64) state.EMA { return state.EMA{Value: v, Samples: n, Updated: At} }
	return &Fleet{
		Workers: []state.Worker{
			{
				Spec:   state.WorkerSpec{ID: "a-0", Address: "10.0.0.1:8000", Models: []string{"model-a"}, Zone: "z1", MaxConcurrency: 8, MetricsFormat: "vllm"},
				Health: scoring.Healthy, InFlight: 3, PrefillTokens: 120, DecodeTokens: 300,
				Limit: caps.Limit{Value: 6, Gradient: 0.9, BaseTTFT: 0.05, BaseITL: 0.01, Updated: At}.State(),
				Stats: state.Stats{
					Latency: ema(1.234, 40), TTFT: ema(0.0875, 40), TokensPerSec: ema(52.25, 40),
					Requests: 40, Errors: 1,
				},
				Telemetry: state.Telemetry{
					KVUsage: state.Sample{Value: 0.42, At: At}, Waiting: state.Sample{Value: 2, At: At}, At: At,
				},
			},
			{
				Spec:   state.WorkerSpec{ID: "a-1", Address: "10.0.0.2:8000", Models: []string{"model-a", "model-b"}, MaxConcurrency: 4},
				Health: scoring.Unhealthy, Draining: true,
				Stats: state.Stats{Requests: 3, Errors: 3},
			},
			{
				Spec:       state.WorkerSpec{ID: "dyn-0", Address: "10.0.0.9:8000", Models: []string{"model-b"}, MaxConcurrency: 2},
				Health:     scoring.Healthy,
				Registered: true, LeaseExpires: At,
			},
		},
		Queues: []state.QueueDepth{{Model: "model-a", Critical: 1, Standard: 4, Batch: 9}},
		Terms: map[string][]scheduler.ModelTerm{
			"a-0": {{Model: "model-a", Term: scoring.Term{Name: "latency", Weight: 1, Value: 1.234}}},
		},
		Decisions: map[string]*scheduler.Decision{RequestID: typicalDecision()},
		OnRead: func(f *Fleet) {
			for i := range f.Workers {
				if f.Workers[i].Registered {
					// Half a second over Lease: rendered rounded to the
					// second, it reads Lease however slow the test runs.
					f.Workers[i].LeaseExpires = time.Now().Add(Lease + 400*time.Millisecond)
				}
			}
		},
	}
}

func typicalDecision() *scheduler.Decision {
	return &scheduler.Decision{
		RequestID: RequestID, Time: At, Replica: Replica, Model: "model-a", Priority: state.PriorityStandard,
		Tenant: "team-x", PromptTokens: 250, MaxTokens: 64, Stream: true,
		SLO: scheduler.SLO{
			TTFT: scheduler.NewObjective(500*time.Millisecond, scheduler.SLOClamped),
			TPOT: scheduler.NewObjective(100*time.Millisecond, scheduler.SLODefault),
		},
		Strategy: "scored", Outcome: scheduler.OutcomeClaimed, Worker: "a-0",
		WaitSeconds: 0.125, QueuePosition: 2, DecideMicros: 87.4, SnapshotAge: 0.0421,
		Conflict: true, Unknown: []string{"kv_pressure"},
		Candidates: []scoring.Line{
			{
				Worker: "a-1", Active: 1, Cap: 4, ActiveWeight: 1, Total: 4.5,
				Terms: []scoring.Term{{Name: "latency", Weight: 1, Value: 3.5}, {Name: "kv_pressure", Weight: 2, Unknown: true}},
			},
			{
				Worker: "a-0", Active: 3, Cap: 6, ActiveWeight: 1, Total: 4.234,
				Terms: []scoring.Term{{Name: "latency", Weight: 1, Value: 1.234}, {Name: "kv_pressure", Weight: 2, Value: 0.42}},
			},
			{
				Worker: "a-2", Active: 4, Cap: 4, Full: true, ActiveWeight: 1, Total: scoring.Infinite,
				Terms: []scoring.Term{{Name: "latency", Weight: 1, Value: 0.9}},
			},
		},
		Excluded:    []scoring.Excluded{{Worker: "a-3", Reason: "draining"}},
		LearnedCaps: map[string]int{"a-0": 6},
		Result: &scheduler.Result{
			Status: 200, ServedBy: "a-0", LatencySeconds: 1.5, TTFTSeconds: 0.2, TokensPerSecond: 48.3, CompletionTokens: 64,
		},
	}
}
