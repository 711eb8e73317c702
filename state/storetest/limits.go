package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// runLimits checks learned limits and prefix forgetting.
func runLimits(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("LearnedLimitCapsClaimsOnEveryReplica", func(t *testing.T) {
		s := newStore(t, def)
		learnedLimit(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("RaisedLimitGrantsWaiters", func(t *testing.T) { raisedLimit(t, newStore(t, def)) })
	t.Run("TokenLimitCapsClaimsOnEveryReplica", func(t *testing.T) {
		s := newStore(t, def)
		tokenLimit(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("TokenLimitCountsTheMatch", func(t *testing.T) { tokenLimitMatch(t, newStore(t, def)) })
	t.Run("TokenLimitHoldsWaiters", func(t *testing.T) { tokenLimitWaiter(t, newStore(t, def)) })
	t.Run("LimitGoesWithWorker", func(t *testing.T) { limitGoes(t, newStore(t, def)) })
	t.Run("ForgetPrefixesEmptiesTheIndex", func(t *testing.T) { forgetPrefixes(t, newStore(t, def)) })
	t.Run("PredictedHitTokensCounted", func(t *testing.T) { predictedHits(t, newStore(t, def)) })
	t.Run("PrefixTrustScalesTheMatch", func(t *testing.T) { prefixTrust(t, newStore(t, def)) })
	t.Run("NoConfiguredCapMeansUnlimited", func(t *testing.T) { noCap(t, newStore(t, def)) })
}

// predictedHits: the winner of a claim with a prefix match counts the
// tokens the match predicts cached (never the prompt's last one), for the
// check against the engine's own hits.
func predictedHits(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	blocks := seqBlocks(1, 8)
	cands := []state.Candidate{{Worker: "w0", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 1}}}
	for _, tc := range []struct {
		prompt int
		want   int64
	}{{200, 0}, {200, 128}, {100, 128 + 99}} { // cumulative
		id, res := claimAff(t, s, cands, scoring.Prompt{Blocks: blocks, PromptTokens: tc.prompt})
		release(t, s, id)
		snap, err := s.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Workers[0].PredictedHitTokens; got != tc.want {
			t.Fatalf("after a claim matching %d blocks of a %d-token prompt: %d predicted hit tokens, want %d", res.Live[0].Match, tc.prompt, got, tc.want)
		}
	}
}

// prefixTrust: a warm worker whose engine confirmed a tenth of the
// predicted hits counts a tenth of its match, and loses to a cold one it
// would beat with full trust.
func prefixTrust(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	blocks := seqBlocks(100, 8)
	matchOn(t, s, "w0", 1024, blocks)
	pick := func(trust float64) string {
		cands := []state.Candidate{
			{Worker: "w0", Cap: 8, Base: 50, LiveWeights: scoring.LiveWeights{Miss: 100, KVBlocks: 1024, Trust: trust}},
			{Worker: "w1", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 100, KVBlocks: 1024}},
		}
		id, res := claimAff(t, s, cands, scoring.Prompt{Blocks: blocks})
		release(t, s, id)
		return cands[res.Index].Worker
	}
	// Full trust first: the winner records the blocks, so w1 stays cold.
	if w := pick(1); w != "w0" {
		t.Fatalf("with full trust the warm worker scores 50 against 100, yet %s won", w)
	}
	if w := pick(0.1); w != "w1" {
		t.Fatalf("with trust 0.1 the warm worker scores 50+90 against 100, yet %s won", w)
	}
}

func putLimit(t *testing.T, s state.Store, worker string, l state.Limit) {
	t.Helper()
	if err := s.PutLimits(context.Background(), map[string]state.Limit{worker: l}); err != nil {
		t.Fatal(err)
	}
}

func limitOf(t *testing.T, s state.Store, worker string) state.Limit {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == worker {
			return w.Limit
		}
	}
	t.Fatalf("no worker %s in the snapshot", worker)
	return state.Limit{}
}

// learnedLimit: a limit written by one replica shows in every replica's
// snapshot, with the limiter's memory as written, and caps claims from every replica
// below the configured cap; removing it restores the cap.
func learnedLimit(t *testing.T, s, peer state.Store) {
	specs := workers(1, 4)
	register(t, s, specs)
	want := state.Limit{Value: 2, Limiter: []byte(`{"estimate":2.5,"seen":[9,8]}`)}
	putLimit(t, s, "w0", want)
	if got := limitOf(t, peer, "w0"); got.Value != 2 || string(got.Limiter) != string(want.Limiter) {
		t.Fatalf("peer sees limit %+v, want %+v", got, want)
	}
	cands := candidates(specs)
	for i, st := range []state.Store{s, peer} {
		if _, w := mustClaim(t, st, cands); w != "w0" {
			t.Fatalf("claim %d under the limit: got %q", i, w)
		}
	}
	if _, w := mustClaim(t, peer, cands); w != "" {
		t.Fatalf("claim past the learned limit 2 (cap 4) landed on %q", w)
	}
	putLimit(t, peer, "w0", state.Limit{})
	if _, w := mustClaim(t, s, cands); w != "w0" {
		t.Fatalf("claim after the limit was lifted: got %q", w)
	}
}

// raisedLimit: a waiter queued because of a learned limit gets the slot
// the moment the limit is raised.
func raisedLimit(t *testing.T, s state.Store) {
	specs := workers(1, 4)
	register(t, s, specs)
	putLimit(t, s, "w0", state.Limit{Value: 1})
	cands := candidates(specs)
	if _, w := mustClaim(t, s, cands); w != "w0" {
		t.Fatalf("first claim: %q", w)
	}
	n := subscribe(t, s, "r1")
	if res := enqueue(t, s, "waiter-1", cands, state.PriorityStandard, 8, "r1"); !res.Queued {
		t.Fatalf("second request not queued under the limit: %+v", res)
	}
	putLimit(t, s, "w0", state.Limit{Value: 2})
	if got := n.next(t); got.Waiter != "waiter-1" || got.Worker != "w0" {
		t.Fatalf("notice %+v, want waiter-1 granted w0", got)
	}
	if got := inFlight(t, s)["w0"]; got != 2 {
		t.Fatalf("in flight %d, want 2", got)
	}
}

// limitGoes: a deregistered worker's limit goes with it; one registering
// again starts from its configured cap. A limit for an unknown worker is
// ignored.
func limitGoes(t *testing.T, s state.Store) {
	specs := workers(1, 4)
	register(t, s, specs)
	putLimit(t, s, "w0", state.Limit{Value: 1})
	putLimit(t, s, "ghost", state.Limit{Value: 1})
	if err := s.Deregister(context.Background(), "w0"); err != nil {
		t.Fatal(err)
	}
	register(t, s, specs)
	if got := limitOf(t, s, "w0"); got.Value != 0 {
		t.Fatalf("re-registered worker kept limit %+v", got)
	}
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Workers) != 1 {
		t.Fatalf("a limit for an unknown worker registered it: %d workers", len(snap.Workers))
	}
}

// forgetPrefixes: a restarted engine's index is emptied; the other
// worker's stays.
func forgetPrefixes(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	blocks := seqBlocks(1, 16)
	matchOn(t, s, "w0", 1024, blocks)
	matchOn(t, s, "w1", 1024, blocks)
	if err := s.ForgetPrefixes(context.Background(), "w0"); err != nil {
		t.Fatal(err)
	}
	if m := matchOn(t, s, "w0", 1024, blocks); m != 0 {
		t.Fatalf("w0 matched %d blocks after its index was forgotten", m)
	}
	if m := matchOn(t, s, "w1", 1024, blocks); m != 16 {
		t.Fatalf("w1 matched %d blocks, want 16", m)
	}
	if err := s.ForgetPrefixes(context.Background(), "ghost"); !errors.Is(err, state.ErrUnknownWorker) {
		t.Fatalf("forget on an unknown worker: %v, want ErrUnknownWorker", err)
	}
}
