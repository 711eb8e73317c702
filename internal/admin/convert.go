package admin

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-router/llm-router/internal/caps"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func avg(e state.EMA) *pb.MovingAverage {
	if e.Samples == 0 {
		return nil
	}
	return &pb.MovingAverage{Value: e.Value, Samples: e.Samples, Updated: ts(e.Updated)}
}

func (s *Service) worker(w state.Worker, terms []scheduler.ModelTerm) *pb.Worker {
	src := "config"
	if w.Registered {
		src = "registered"
	}
	out := &pb.Worker{
		Spec: &pb.WorkerSpec{
			Id: w.Spec.ID, Address: w.Spec.Address, Models: w.Spec.Models, Zone: w.Spec.Zone, Region: w.Spec.Region,
			MaxConcurrency: int32(w.Spec.MaxConcurrency), MetricsFormat: w.Spec.MetricsFormat, MetricsUrl: w.Spec.MetricsURL,
			HealthUrl: w.Spec.HealthURL, DcgmUrl: w.Spec.DCGMURL, DcgmGpu: w.Spec.DCGMGPU,
			Role: string(w.Spec.Role.OrBoth()),
		},
		Health: string(w.Health), Draining: w.Draining, InFlight: int32(w.InFlight), Source: src,
		PrefillTokens: int32(w.PrefillTokens), DecodeTokens: int32(w.DecodeTokens),
		LeaseExpires:    ts(w.LeaseExpires),
		LatencySeconds:  avg(w.Stats.Latency),
		TtftSeconds:     avg(w.Stats.TTFT),
		TokensPerSecond: avg(w.Stats.TokensPerSec),
		Requests:        w.Stats.Requests, Errors: w.Stats.Errors,
		KvUsage: w.Telemetry.KVUsage.Value, Waiting: w.Telemetry.Waiting.Value, ScrapedAt: ts(w.Telemetry.At),
	}
	if r := w.Telemetry.HitRatio; !r.At.IsZero() {
		out.PrefixHitRatio = r.Value
	}
	if l := caps.FromState(w.Limit); l.Value > 0 {
		out.LearnedLimit = &pb.LearnedLimit{
			Value: int32(l.Value), Gradient: l.Gradient, BaseTtftSeconds: l.BaseTTFT, BaseItlSeconds: l.BaseITL, Updated: ts(l.Updated),
			Tokens: l.Tokens,
		}
	}
	for _, t := range terms {
		out.LastScoreTerms = append(out.LastScoreTerms, &pb.ScoreTerm{Model: t.Model, Name: t.Name, Value: t.Value, Unknown: t.Unknown})
	}
	return out
}

func decision(d *scheduler.Decision) *pb.Decision {
	out := &pb.Decision{
		RequestId: d.RequestID, Time: ts(d.Time), Replica: d.Replica, Model: d.Model, Priority: string(d.Priority),
		Tenant: d.Tenant, Strategy: d.Strategy, Fallback: d.Fallback, Outcome: d.Outcome, Worker: d.Worker,
		WaitSeconds: d.WaitSeconds, QueuePosition: int32(d.QueuePosition), DecideMicros: d.DecideMicros,
		UnknownTerms: d.Unknown, MaxTokens: int32(d.MaxTokens), PromptTokensEstimate: int32(d.PromptTokens), Stream: d.Stream,
	}
	if d.SLO != (scheduler.SLO{}) {
		out.Slo = &pb.SLO{
			Ttft: &pb.Objective{Seconds: d.SLO.TTFT.Seconds, Source: string(d.SLO.TTFT.Source)},
			Tpot: &pb.Objective{Seconds: d.SLO.TPOT.Seconds, Source: string(d.SLO.TPOT.Source)},
		}
	}
	for w, l := range d.LearnedCaps {
		if out.LearnedCaps == nil {
			out.LearnedCaps = map[string]int32{}
		}
		out.LearnedCaps[w] = int32(l)
	}
	if len(d.LearnedTokenCaps) > 0 {
		out.LearnedTokenCaps = d.LearnedTokenCaps
	}
	for _, c := range d.Candidates {
		pc := &pb.Candidate{Worker: c.Worker, Active: int32(c.Active), Cap: int32(c.Cap), Total: c.Total}
		if c.ActiveWeight != 0 {
			pc.Terms = append(pc.Terms, &pb.Term{Name: "active", Weight: c.ActiveWeight, Value: float64(c.Active)})
		}
		for _, t := range c.Terms {
			pc.Terms = append(pc.Terms, &pb.Term{Name: t.Name, Weight: t.Weight, Value: t.Value, Unknown: t.Unknown})
		}
		if c.LoadFactor != 0 {
			pc.Terms = append(pc.Terms, &pb.Term{Name: "load_factor", Weight: 1, Value: c.LoadFactor})
		}
		out.Candidates = append(out.Candidates, pc)
	}
	for _, e := range d.Excluded {
		out.Excluded = append(out.Excluded, &pb.Excluded{Worker: e.Worker, Reason: e.Reason})
	}
	if r := d.Result; r != nil {
		out.Result = &pb.DecisionResult{
			Status: int32(r.Status), ServedBy: r.ServedBy, LatencySeconds: r.LatencySeconds, TtftSeconds: r.TTFTSeconds,
			TokensPerSecond: r.TokensPerSecond, CompletionTokens: int32(r.CompletionTokens), Aborted: r.Aborted,
		}
	}
	return out
}
