package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// prefillTime is a live term defined here, outside scoring's built-in
// terms and outside the stores: the predicted time to clear the worker's
// in-flight prefill, p/rate seconds. It contributes one coefficient.
func prefillTime(weight, rate float64) scoring.LiveTerm {
	return scoring.LiveTerm{Name: "prefill_time", Weight: weight, Prefill: 1 / rate}
}

// TestNewLiveTermNeedsNoStoreChange: a candidate scored by a new live
// term is picked by its coefficients alone, in memory and in the Redis
// claim script alike: the worker with more in-flight prefill loses,
// although its curve alone would win, and the decision's breakdown shows
// the term's contribution.
func TestNewLiveTermNeedsNoStoreChange(t *testing.T) {
	ctx := context.Background()
	limits := state.Limits{Lease: time.Minute}
	stores := map[string]state.Store{"memory": memory.New(nil, limits)}
	if !testing.Short() {
		srv, err := stack.StartRedis(ctx, t.TempDir(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Stop(time.Second)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer client.Close()
		stores["redis"] = redisstore.New(client, "liveterm", limits)
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) { pickByPrefillTime(ctx, t, s) })
	}
}

func pickByPrefillTime(ctx context.Context, t *testing.T, s state.Store) {
	specs := []state.WorkerSpec{
		{ID: "w0", Address: "10.3.0.1:1", Models: []string{"m"}, MaxConcurrency: 8},
		{ID: "w1", Address: "10.3.0.2:1", Models: []string{"m"}, MaxConcurrency: 8},
	}
	if err := s.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	// 4000 prompt tokens in flight on w0.
	busy, err := s.Claim(ctx, state.ClaimRequest{ID: "busy", Candidates: []state.Candidate{{Worker: "w0", Cap: 8}}, Prompt: scoring.Prompt{PromptTokens: 4000}})
	if err != nil || busy.Index != 0 {
		t.Fatalf("hold prefill on w0: %+v %v", busy, err)
	}
	// By their curves alone w0 wins: 0 against 1.
	cands := []scoring.Candidate{{Worker: "w0", Cap: 8}, {Worker: "w1", Cap: 8, Curve: scoring.Curve{Base: 1}}}
	prompt := scoring.Prompt{PromptTokens: 100, DecodeTokens: 10}
	if res := claim(ctx, t, s, "plain", cands, scoring.Prompt{}); res.Index != 0 {
		t.Fatalf("without the term: picked %d, want w0", res.Index)
	}
	// With it, w0 scores 1·4000/1000 = 4 more: w1 wins.
	for i := range cands {
		cands[i].AddLive(prefillTime(1, 1000))
	}
	res := claim(ctx, t, s, "timed", cands, prompt)
	if res.Index != 1 {
		t.Fatalf("with prefill_time: picked %d (live %+v), want w1", res.Index, res.Live)
	}
	if ref := scoring.PickLive(cands, prompt, res.Active, res.Live, res.Available); ref != res.Index {
		t.Fatalf("the store picked %d, the reference %d on the same figures", res.Index, ref)
	}
	found := false
	for _, term := range scoring.BreakdownLive(cands, prompt, res.Active, res.Live)[0].Terms {
		if term.Name == "prefill_time" {
			found = term.Contribution() == 4
		}
	}
	if !found {
		t.Fatalf("no prefill_time of 4 in w0's breakdown")
	}
}

// claim offers cands as the scheduler does (curve and live weights, as
// planned) and releases the claim.
func claim(ctx context.Context, t *testing.T, s state.Store, id string, cands []scoring.Candidate, p scoring.Prompt) state.ClaimResult {
	t.Helper()
	sc := make([]state.Candidate, len(cands))
	for i, c := range cands {
		sc[i] = state.Candidate{Worker: c.Worker, Cap: c.Cap, Base: c.Curve.Base, Slope: c.Curve.Slope, Mult: c.Curve.Mult, LiveWeights: c.LiveWeights}
	}
	res, err := s.Claim(ctx, state.ClaimRequest{ID: id, Candidates: sc, Prompt: p})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index >= 0 {
		if _, err := s.Release(ctx, state.Release{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return res
}
