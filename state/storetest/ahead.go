package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// runAhead checks prefill ahead (Worker.AheadTokens, scoring.Live.Ahead):
// a claim's uncached prompt counts from its claim (or grant) to its first
// token or its end, on every replica, and claims score with it.
func runAhead(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("AheadUntilFirstToken", func(t *testing.T) {
		s := newStore(t, def)
		aheadFirstToken(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("AheadGoesWithLapsedLease", func(t *testing.T) {
		aheadLapse(t, newStore(t, state.Limits{Lease: 300 * time.Millisecond}))
	})
	t.Run("AheadOfGrantedWaiter", func(t *testing.T) { aheadGranted(t, newStore(t, def)) })
	t.Run("AheadScored", func(t *testing.T) { aheadScored(t, newStore(t, def)) })
}

// ahead returns each worker's prefill ahead.
func ahead(t *testing.T, s state.Store) map[string]int {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = w.AheadTokens
	}
	return out
}

func firstToken(t *testing.T, s state.Store, id string) {
	t.Helper()
	if err := s.FirstToken(context.Background(), id); err != nil {
		t.Fatalf("first token of %s: %v", id, err)
	}
}

func aheadFirstToken(t *testing.T, s, peer state.Store) {
	ctx := context.Background()
	register(t, s, workers(2, 8))
	one := []state.Candidate{{Worker: "w0", Cap: 8}}
	a := scoring.Prompt{Blocks: seqBlocks(1, 4), PromptTokens: 100, DecodeTokens: 50}
	id1, _ := claimAff(t, s, one, a)
	id2, res := claimAff(t, peer, one, a)
	if l := res.Live[0]; l.Ahead != 100 || l.Prefill != 100 {
		t.Fatalf("second claim read %+v; want 100 prefill, 100 ahead", l)
	}
	// The second is 4 blocks (64 tokens) cached: 36 uncached, ahead.
	if got := ahead(t, peer)["w0"]; got != 136 {
		t.Fatalf("ahead %d, want 136", got)
	}
	firstToken(t, peer, id1)
	firstToken(t, s, id1) // only the first counts
	firstToken(t, s, "no-such-claim")
	if got, tok := ahead(t, s)["w0"], tokens(t, s)["w0"]; got != 36 || tok != [2]int{136, 100} {
		t.Fatalf("after the first token: ahead %d, tokens %v; want 36, [136 100]", got, tok)
	}
	// Move carries what is still ahead, and only that.
	if err := s.Move(ctx, id2, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Move(ctx, id1, "w1"); err != nil {
		t.Fatal(err)
	}
	if got := ahead(t, s); got["w0"] != 0 || got["w1"] != 36 {
		t.Fatalf("after the moves: ahead %v, want w1 36", got)
	}
	release(t, s, id2)
	firstToken(t, peer, id2) // released: ignored
	if got := ahead(t, s); got["w0"] != 0 || got["w1"] != 0 {
		t.Fatalf("after the release: ahead %v, want none", got)
	}
	id3, _ := claimAff(t, s, one, scoring.Prompt{PromptTokens: 70})
	release(t, peer, id3) // ended before its first token
	release(t, s, id1)
	if got := ahead(t, s); got["w0"] != 0 || got["w1"] != 0 {
		t.Fatalf("ahead left: %v", got)
	}
}

func aheadLapse(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}}, scoring.Prompt{PromptTokens: 40, DecodeTokens: 10})
	if got := ahead(t, s)["w0"]; got != 40 {
		t.Fatalf("ahead %d, want 40", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ahead(t, s)["w0"] != 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if got := ahead(t, s)["w0"]; got != 0 {
		t.Fatalf("a lapsed claim's prefill stayed ahead: %d", got)
	}
}

func aheadGranted(t *testing.T, s state.Store) {
	register(t, s, workers(1, 1))
	cands := []state.Candidate{{Worker: "w0", Cap: 1}}
	id1, _ := claimAff(t, s, cands, scoring.Prompt{PromptTokens: 10, DecodeTokens: 5})
	id2 := claimID()
	res, err := s.Claim(context.Background(), state.ClaimRequest{
		ID: id2, Candidates: cands, Prompt: scoring.Prompt{Blocks: seqBlocks(1, 4), PromptTokens: 100, DecodeTokens: 20},
		Queue: &state.QueueSpec{Model: "m", Priority: state.PriorityStandard, Allow: 4, Replica: "r"},
	})
	if err != nil || !res.Queued {
		t.Fatalf("queue: %+v %v", res, err)
	}
	firstToken(t, s, id2) // a waiter has no first token yet: ignored
	if got := ahead(t, s)["w0"]; got != 10 {
		t.Fatalf("a waiter's prompt counts ahead before its grant: %d", got)
	}
	release(t, s, id1)
	if got := ahead(t, s)["w0"]; got != 100 {
		t.Fatalf("granted waiter: ahead %d, want 100", got)
	}
	firstToken(t, s, id2)
	if got := ahead(t, s)["w0"]; got != 0 {
		t.Fatalf("granted waiter past its first token: ahead %d", got)
	}
	release(t, s, id2)
}

// aheadScored: a worker with prefill ahead scores Ahead per token until
// the request ahead has its first token.
func aheadScored(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	busy, _ := claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}}, scoring.Prompt{PromptTokens: 100})
	cands := []state.Candidate{
		{Worker: "w0", Cap: 8, LiveWeights: scoring.LiveWeights{Ahead: 1}},
		{Worker: "w1", Cap: 8, Base: 50, LiveWeights: scoring.LiveWeights{Ahead: 1}},
	}
	a := scoring.Prompt{PromptTokens: 10}
	id, res := claimAff(t, s, cands, a)
	if res.Index != 1 || res.Live[0].Ahead != 100 {
		t.Fatalf("with 100 tokens ahead on w0: index %d, live %+v; want w1", res.Index, res.Live)
	}
	release(t, s, id)
	firstToken(t, s, busy)
	id, res = claimAff(t, s, cands, a)
	if res.Index != 0 || res.Live[0].Ahead != 0 {
		t.Fatalf("after the first token on w0: index %d, live %+v; want w0", res.Index, res.Live)
	}
	release(t, s, id)
	release(t, s, busy)
}
