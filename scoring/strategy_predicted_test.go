package scoring

import (
	"math"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
)

// handModel is a worker's latency model with hand-set coefficients:
// TTFT = 0.05 + 0.15·Q + 0.2·U + 0.01·R + 0.004·(Q + U)·R, TPOT = 0.02 + 0.001·R +
// 0.0005·T (seconds, tokens in thousands).
func handModel(scale float64) latency.Model {
	var m latency.Model
	for i, v := range []float64{0.05, 0.15, 0.2, 0.01, 0.004} {
		m.TTFT.Coef[i] = v * scale
	}
	for i, v := range []float64{0.02, 0.001, 0.0005} {
		m.TPOT.Coef[i] = v * scale
	}
	return m
}

func predictedWorker(id string, m latency.Model) Worker {
	return worker(id, func(w *Worker) {
		w.Active, w.AheadTokens, w.DecodeTokens, w.PrefillTokens = 2, 1000, 2000, 1200
		w.LatencyModels = map[string]latency.Model{"m": m}
	})
}

func planPredicted(t *testing.T, j Job, ws ...Worker) Plan {
	t.Helper()
	s, err := New(Predicted, params())
	if err != nil {
		t.Fatal(err)
	}
	return Build(s, Input{Job: j, Workers: ws})
}

// The score is the predicted completion time, evaluated the way the
// store does: the curve at the live count plus the live TTFT terms.
func TestPredictedScoreIsCompletionTime(t *testing.T) {
	j := Job{Model: "m", PromptTokens: 512, MaxTokens: 100, Blocks: make([]uint64, 32)}
	plan := planPredicted(t, j, predictedWorker("a", handModel(1)))
	c := plan.Candidates[0]
	live := Live{Ahead: 800, Decode: 1500, Prefill: 1300}
	for _, tc := range []struct {
		name  string
		match int
		want  float64
	}{
		// Q = 0.8, U = 0.512, 3 in flight live, 2 in the snapshot: TTFT =
		// 0.05 + 0.15·0.8 + 0.2·0.512 + 0.01·3 + 0.004·1.312·2 (the
		// product on the snapshot's count) = 0.312896. TPOT at 3 in flight (R = 4) and
		// the snapshot's T = 1 + 2 + 0.512 + 0.1 = 3.612: 0.02 + 0.004 +
		// 0.001806 = 0.025806, times 100 output tokens.
		// The stall: the snapshot's 2 in flight wait a1·u each.
		{"no match", 0, 0.312896 + 2.5806 + 2*0.2*0.512},
		// 10 blocks cached: U = 0.352.
		{"ten blocks cached", 10, 0.05 + 0.12 + 0.2*0.352 + 0.03 + 0.004*1.152*2 + 2.5806 + 2*0.2*0.352},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := live
			l.Match = tc.match
			lines := BreakdownLive(plan.Candidates, j.Prompt(), []int{3}, []Live{l})
			got := c.Curve.At(3) + LiveScore(c.LiveWeights, j.Prompt(), l)
			if !near(got, tc.want) || !near(lines[0].Total, tc.want) {
				t.Fatalf("score %.9f, line total %.9f, want %.9f", got, lines[0].Total, tc.want)
			}
		})
	}
	// The snapshot's predictions, in the decision log: the whole prompt
	// uncached, the snapshot's 1000 tokens ahead and 2 in flight.
	ttft := 0.05 + 0.15*1 + 0.2*0.512 + 0.01*2 + 0.004*1.512*2
	tpot := 0.02 + 0.001*3 + 0.0005*3.612
	if tr := c.Terms; tr[0].Name != "predicted_ttft" || math.Abs(tr[0].Value-ttft) > 1e-9 ||
		tr[1].Name != "predicted_tpot" || math.Abs(tr[1].Value-tpot) > 1e-9 {
		t.Fatalf("terms %+v, want predicted_ttft %v, predicted_tpot %v", tr, ttft, tpot)
	}
}

// A prefix hit lowers the score by exactly au per hit token for the
// request and for each of the snapshot's requests in flight there (2),
// plus a3 per token and request in flight (the decodes' share of its
// prefill steps): cache affinity and load are one number, in seconds.
func TestPredictedPrefixHitLowersScorePerToken(t *testing.T) {
	j := Job{Model: "m", PromptTokens: 512, MaxTokens: 64, Blocks: make([]uint64, 32)}
	c := planPredicted(t, j, predictedWorker("a", handModel(1))).Candidates[0]
	p := j.Prompt()
	for _, match := range []int{1, 8, 31} {
		cold := LiveScore(c.LiveWeights, p, Live{Ahead: 300, Match: 0})
		warm := LiveScore(c.LiveWeights, p, Live{Ahead: 300, Match: match})
		hit := float64(BlockTokens * match)
		if want := (3*0.2 + 2*0.004) * 1e-3 * hit; !near(cold-warm, want) {
			t.Fatalf("match %d: lowered by %.9f, want (3·au + 2·a3)·%v tokens = %.9f", match, cold-warm, hit, want)
		}
	}
}

func TestPredictedCeiling(t *testing.T) {
	known := handModel(1)
	unknownTTFT := handModel(1)
	unknownTTFT.TTFT.Unknown = true
	// The live form at Ahead 800, no match, 2 in flight in the snapshot:
	// 0.15·0.8 + 0.2·0.512 + 0.004·2·1.312 = 0.232896 s above a0 + a2·2 =
	// 0.07.
	live := Live{Ahead: 800, Decode: 1500}
	for _, tc := range []struct {
		name    string
		m       latency.Model
		obj     Objectives
		ceiling float64
		over    bool
	}{
		{"no objective", known, Objectives{}, 0, false},
		{"ttft met", known, Objectives{TTFT: 400 * time.Millisecond}, 0.33, false},
		{"ttft missed at this load", known, Objectives{TTFT: 280 * time.Millisecond}, 0.21, true},
		{"a0 and the load's share alone miss it", known, Objectives{TTFT: 60 * time.Millisecond}, Unattainable, true},
		// Snapshot TPOT 0.024806 s with the request.
		{"tpot would be missed", known, Objectives{TTFT: time.Second, TPOT: 20 * time.Millisecond}, Unattainable, true},
		{"tpot met", known, Objectives{TPOT: 30 * time.Millisecond}, 0, false},
		{"unknown model enforces nothing", unknownTTFT, Objectives{TTFT: 40 * time.Millisecond}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := Job{Model: "m", PromptTokens: 512, MaxTokens: 100, Objectives: tc.obj}
			c := planPredicted(t, j, predictedWorker("a", tc.m)).Candidates[0]
			w := c.LiveWeights
			if !near(w.Ceiling, tc.ceiling) {
				t.Fatalf("ceiling %v, want %v", w.Ceiling, tc.ceiling)
			}
			if got := w.Over(j.Prompt(), live); got != tc.over {
				t.Fatalf("over %v, want %v", got, tc.over)
			}
			if tc.over && PickLive([]Candidate{c}, j.Prompt(), []int{2}, []Live{live}, nil) != -1 {
				t.Fatal("the claim took a candidate over its ceiling")
			}
		})
	}
}

// observe feeds n observations of a worker whose true curves are
// handModel(scale) and returns the fitted model.
func observe(scale float64, n int, at time.Time) latency.Model {
	cfg := latency.DefaultConfig()
	truth := handModel(scale)
	var stats latency.Stats
	var m latency.Model
	for i := range n {
		f := latency.Features{Running: i % 7, PrefillTokens: (i * 397) % 3000, DecodeTokens: (i * 911) % 6000, Uncached: 100 + (i*131)%900, Output: 64 + (i*37)%400}
		o := latency.Observation{
			At: at.Add(time.Duration(i) * 100 * time.Millisecond), Features: f,
			TTFT: truth.PredictTTFT(f).Value, TPOT: truth.PredictTPOT(f).Value,
		}
		stats = cfg.Add(stats, cfg.Contribution(m, o))
		m = latency.Fit(cfg, stats, latency.DefaultPrior(), o.At)
	}
	return m
}

// In a fleet of two GPU classes, the slow worker's learned model predicts
// it slower, and an idle request goes to the fast one.
func TestPredictedHeterogeneousFleet(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	fast, slow := observe(1, 200, at), observe(2.5, 200, at)
	if fast.Unknown() || slow.Unknown() {
		t.Fatal("200 observations left a model unknown")
	}
	j := Job{Model: "m", PromptTokens: 800, MaxTokens: 200}
	plan := planPredicted(t, j, predictedWorker("slow", slow), predictedWorker("fast", fast))
	var ttft, tpot [2]float64
	for i, c := range plan.Candidates {
		ttft[i], tpot[i] = c.Terms[0].Value, c.Terms[1].Value
	}
	if ttft[0] < 2*ttft[1] || tpot[0] < 2*tpot[1] {
		t.Fatalf("slow predicted ttft %v tpot %v, fast %v %v: want the slow one at least twice", ttft[0], tpot[0], ttft[1], tpot[1])
	}
	if i := PickLive(plan.Candidates, j.Prompt(), []int{2, 2}, []Live{{Ahead: 500, Decode: 1000}, {Ahead: 500, Decode: 1000}}, nil); plan.Candidates[i].Worker != "fast" {
		t.Fatalf("picked %s, want fast", plan.Candidates[i].Worker)
	}
}

func TestPredictedIdleTTFT(t *testing.T) {
	s, _ := New(Predicted, params())
	ia := s.(interface {
		IdleTTFT(Job, []Worker) (time.Duration, bool)
	})
	j := Job{Model: "m", PromptTokens: 1000}
	unknown := handModel(0.1)
	unknown.TTFT.Unknown = true
	best, ok := ia.IdleTTFT(j, []Worker{predictedWorker("a", handModel(2)), predictedWorker("b", handModel(1))})
	// b idle, its whole prompt uncached: 0.05 + 0.2·1.
	if !ok || best != 250*time.Millisecond {
		t.Fatalf("idle ttft %v %v, want 250ms", best, ok)
	}
	if _, ok := ia.IdleTTFT(j, []Worker{predictedWorker("b", handModel(1)), predictedWorker("c", unknown)}); ok {
		t.Fatal("a worker with an unknown model bounded the wait")
	}
	if _, ok := ia.IdleTTFT(j, []Worker{predictedWorker("b", handModel(1)), worker("d")}); ok {
		t.Fatal("a worker with no model bounded the wait")
	}
}

// In a fleet with a known worker, an unknown one explores: its base is
// spread over its first exploreInFlight requests, so idle it ranks ahead
// of a known worker as fast as itself, at exploreInFlight in flight it
// scores as predicted, and past that more. With no worker known, nothing
// explores.
func TestPredictedUnknownWorkerExplores(t *testing.T) {
	j := Job{Model: "m", PromptTokens: 512, MaxTokens: 100}
	unknown := handModel(1)
	unknown.TTFT.Unknown, unknown.TPOT.Unknown = true, true
	plan := planPredicted(t, j, predictedWorker("known", handModel(1)), predictedWorker("new", unknown))
	known, fresh := plan.Candidates[0].Curve, plan.Candidates[1].Curve
	if fresh.At(0) >= known.At(0) {
		t.Fatalf("idle, the unknown worker scores %.4f, the known one %.4f: want it first", fresh.At(0), known.At(0))
	}
	if !near(fresh.At(exploreInFlight), known.At(exploreInFlight)) {
		t.Fatalf("at %d in flight the unknown worker scores %.6f, want its prediction %.6f", exploreInFlight, fresh.At(exploreInFlight), known.At(exploreInFlight))
	}
	if fresh.At(exploreInFlight+2) <= known.At(exploreInFlight+2) {
		t.Fatal("past exploreInFlight in flight, the unknown worker is not ranked behind its prediction")
	}
	alone := planPredicted(t, j, predictedWorker("a", unknown), predictedWorker("b", unknown))
	if c := alone.Candidates[0].Curve; c.Base <= 0 {
		t.Fatalf("with no worker known, an unknown worker's curve %+v explores", c)
	}
}
