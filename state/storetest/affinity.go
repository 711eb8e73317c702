package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// runAffinity checks the prefix index and the token load: what a claim
// with a Prompt reads, scores and records, across replicas.
func runAffinity(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("PrefixIndexSharedAcrossReplicas", func(t *testing.T) {
		s := newStore(t, def)
		prefixShared(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("PrefixIndexBoundedLRU", func(t *testing.T) { prefixLRU(t, newStore(t, def)) })
	t.Run("PrefixIndexForgottenWhenWorkerGoes", func(t *testing.T) { prefixForgotten(t, newStore(t, def)) })
	t.Run("TokenLoadHeldUntilRelease", func(t *testing.T) { tokensReleased(t, newStore(t, def)) })
	t.Run("TokenLoadGoesWithLapsedLease", func(t *testing.T) {
		tokensLapse(t, newStore(t, state.Limits{Lease: 300 * time.Millisecond}))
	})
	t.Run("TokenLoadOfGrantedWaiter", func(t *testing.T) { tokensQueued(t, newStore(t, def)) })
	t.Run("AffinityYieldsToPrefillLoad", func(t *testing.T) { prefillGuard(t, newStore(t, def)) })
	t.Run("MatchesLookedUpOnlyWhereTheyCanWin", func(t *testing.T) { matchBounded(t, newStore(t, def)) })
}

// matchBounded: a candidate that could not win even with a full match is
// not looked up (Unread), whatever its index holds; one that can is, and
// wins with its match.
func matchBounded(t *testing.T, s state.Store) {
	register(t, s, workers(3, 8))
	prompt := seqBlocks(1, 8)
	if m := matchOn(t, s, "w0", 0, prompt); m != 0 {
		t.Fatalf("fresh index matched %d", m)
	}
	// w0 now holds the whole prompt. Prefix 10: a full miss costs 10.
	// w0's curve is 1000 (with a full match: 1000 > the lowest no-match
	// score, w1's 10): never looked up. w2's 5 (with a full match: 5 ≤ 10)
	// is, and matches nothing.
	cands := []state.Candidate{{Worker: "w0", Cap: 8, Base: 1000, LiveWeights: scoring.LiveWeights{Miss: 10}}, {Worker: "w1", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 10}}, {Worker: "w2", Cap: 8, Base: 5, LiveWeights: scoring.LiveWeights{Miss: 10}}}
	id, res := claimAff(t, s, cands, scoring.Prompt{Blocks: prompt})
	if res.Index != 1 || !res.Live[0].Unread || res.Live[0].Match != 0 || res.Live[1].Unread || res.Live[2].Unread {
		t.Fatalf("claim: index %d, live %+v; want w1, w0 not looked up, w1 and w2 looked up", res.Index, res.Live)
	}
	release(t, s, id)
	// (w1, the winner, now holds the prompt too.) With a curve of 5, w0's
	// full match (score 5) beats w2's no match (15): looked up, and it wins.
	cands = []state.Candidate{{Worker: "w0", Cap: 8, Base: 5, LiveWeights: scoring.LiveWeights{Miss: 10}}, {Worker: "w2", Cap: 8, Base: 5, LiveWeights: scoring.LiveWeights{Miss: 10}}}
	id, res = claimAff(t, s, cands, scoring.Prompt{Blocks: prompt})
	if res.Index != 0 || res.Live[0].Unread || res.Live[0].Match != 8 {
		t.Fatalf("claim: index %d, live %+v; want w0 with its 8 blocks", res.Index, res.Live)
	}
	release(t, s, id)
}

// seqBlocks returns n block hashes from..from+n-1 (any values do: the
// store treats them as opaque).
func seqBlocks(from uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

func claimAff(t *testing.T, s state.Store, cands []state.Candidate, a scoring.Prompt) (string, state.ClaimResult) {
	t.Helper()
	id := claimID()
	res, err := s.Claim(context.Background(), state.ClaimRequest{ID: id, Candidates: cands, Prompt: a})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Live) != len(cands) {
		t.Fatalf("live figures for %d of %d candidates", len(res.Live), len(cands))
	}
	return id, res
}

// tokens returns each worker's in-flight prefill and decode tokens.
func tokens(t *testing.T, s state.Store) map[string][2]int {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = [2]int{w.PrefillTokens, w.DecodeTokens}
	}
	return out
}

// matchOn claims (and releases) with blocks on the single candidate
// worker, returning the match the claim read.
func matchOn(t *testing.T, s state.Store, worker string, kv int, blocks []uint64) int {
	t.Helper()
	id, res := claimAff(t, s, []state.Candidate{{Worker: worker, Cap: 8, LiveWeights: scoring.LiveWeights{KVBlocks: kv}}}, scoring.Prompt{Blocks: blocks})
	if res.Index != 0 {
		t.Fatalf("claim on %s: %+v", worker, res)
	}
	release(t, s, id)
	return res.Live[0].Match
}

func prefixShared(t *testing.T, s, peer state.Store) {
	register(t, s, workers(2, 8))
	first := seqBlocks(1, 8)
	id, res := claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}, {Worker: "w1", Cap: 8, Base: 1}}, scoring.Prompt{Blocks: first})
	if res.Index != 0 || res.Live[0].Match != 0 {
		t.Fatalf("first claim: %+v", res)
	}
	release(t, s, id)
	// Another replica, another conversation turn: 4 blocks shared. w0's
	// match (0.5 missed) beats w1's lower base (all missed).
	next := append(seqBlocks(1, 4), seqBlocks(100, 4)...)
	cands := []state.Candidate{{Worker: "w0", Cap: 8, Base: 1, LiveWeights: scoring.LiveWeights{Miss: 10}}, {Worker: "w1", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 10}}}
	id, res = claimAff(t, peer, cands, scoring.Prompt{Blocks: next})
	if res.Index != 0 || res.Live[0].Match != 4 || res.Live[1].Match != 0 {
		t.Fatalf("second claim: index %d, live %+v; want w0 with 4 blocks matched", res.Index, res.Live)
	}
	release(t, peer, id)
	if m := matchOn(t, s, "w0", 0, next); m != 8 {
		t.Fatalf("the winner records the blocks it was sent: match %d, want 8", m)
	}
}

func prefixLRU(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	// 16-block prompts: 4 index entries each (state.IndexStride); a bound
	// of 24 blocks keeps 6 entries.
	old, recent := seqBlocks(1, 16), seqBlocks(100, 16)
	matchOn(t, s, "w0", 24, old)
	// 8 entries into 6: the two least recent go, the older prompt's tail.
	matchOn(t, s, "w0", 24, recent)
	if m := matchOn(t, s, "w0", 24, recent); m != 16 {
		t.Fatalf("recent prompt: match %d, want 16", m)
	}
	snap, err := s.Snapshot(context.Background())
	if err != nil || len(snap.Workers) != 1 || snap.Workers[0].PrefixBlocks != 24 {
		t.Fatalf("index size: %+v %v; want 24 blocks", snap.Workers, err)
	}
	if m := matchOn(t, s, "w0", 24, old); m != 8 {
		t.Fatalf("older prompt: match %d, want its first 8 blocks", m)
	}
	// Reading old again made it most recent: now recent lost its tail.
	if m := matchOn(t, s, "w0", 24, recent); m != 8 {
		t.Fatalf("after the older was touched: match %d, want 8", m)
	}
}

func prefixForgotten(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 8))
	b := seqBlocks(1, 4)
	matchOn(t, s, "w0", 0, b)
	if err := s.SetHealth(ctx, "w0", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHealth(ctx, "w0", scoring.Healthy); err != nil {
		t.Fatal(err)
	}
	if m := matchOn(t, s, "w0", 0, b); m != 0 {
		t.Fatalf("after the worker went unhealthy (it may have restarted): match %d", m)
	}
	if err := s.Deregister(ctx, "w0"); err != nil {
		t.Fatal(err)
	}
	register(t, s, workers(1, 8))
	if m := matchOn(t, s, "w0", 0, b); m != 0 {
		t.Fatalf("after the worker left and came back: match %d", m)
	}
	dyn := state.WorkerSpec{ID: "dyn", Address: "10.9.9.8:8000", Models: []string{"m"}, MaxConcurrency: 2}
	for range 2 {
		if _, err := s.RegisterLeased(ctx, dyn, time.Minute); err != nil {
			t.Fatal(err)
		}
		if m := matchOn(t, s, "dyn", 0, b); m != 0 {
			t.Fatalf("a worker registering (as it starts) kept its index: match %d", m)
		}
	}
	if _, err := s.Heartbeat(ctx, "dyn", time.Minute); err != nil {
		t.Fatal(err)
	}
	if m := matchOn(t, s, "dyn", 0, b); m != 4 {
		t.Fatalf("a heartbeat dropped the index: match %d, want 4", m)
	}
}

func tokensReleased(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(2, 8))
	b := seqBlocks(1, 4)
	one := []state.Candidate{{Worker: "w0", Cap: 8}}
	a := scoring.Prompt{Blocks: b, PromptTokens: 100, DecodeTokens: 50}
	id1, _ := claimAff(t, s, one, a)
	id2, res := claimAff(t, s, one, a)
	if l := res.Live[0]; l.Match != 4 || l.Prefill != 100 || l.Decode != 50 {
		t.Fatalf("second claim read %+v; want match 4, 100 prefill, 50 decode", l)
	}
	// The second is 4 blocks (64 tokens) cached: 36 uncached.
	if got := tokens(t, s)["w0"]; got != [2]int{136, 100} {
		t.Fatalf("in flight %v; want [136 100]", got)
	}
	if err := s.Move(ctx, id2, "w1"); err != nil {
		t.Fatal(err)
	}
	if got := tokens(t, s); got["w0"] != [2]int{100, 50} || got["w1"] != [2]int{36, 50} {
		t.Fatalf("after a move: %v", got)
	}
	release(t, s, id1)
	release(t, s, id2)
	if ok, _ := s.Release(ctx, state.Release{ID: id2}); ok {
		t.Fatal("released twice")
	}
	if got := tokens(t, s); got["w0"] != [2]int{} || got["w1"] != [2]int{} {
		t.Fatalf("tokens left after release: %v", got)
	}
}

func tokensLapse(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}}, scoring.Prompt{PromptTokens: 40, DecodeTokens: 10})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && tokens(t, s)["w0"] != [2]int{} {
		time.Sleep(50 * time.Millisecond)
	}
	if got := tokens(t, s)["w0"]; got != [2]int{} {
		t.Fatalf("a lapsed claim's tokens stayed: %v", got)
	}
}

func tokensQueued(t *testing.T, s state.Store) {
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
	if got := tokens(t, s)["w0"]; got != [2]int{10, 5} {
		t.Fatalf("a waiter's tokens count before its grant: %v", got)
	}
	release(t, s, id1)
	if got := tokens(t, s)["w0"]; got != [2]int{100, 20} {
		t.Fatalf("granted waiter: %v; want [100 20]", got)
	}
	release(t, s, id2)
	if got := tokens(t, s)["w0"]; got != [2]int{} {
		t.Fatalf("tokens left: %v", got)
	}
}

// prefillGuard: w0 holds the prefix but already prefills 100 tokens; with
// a limit of 120 the request's 36 uncached tokens would pass it, so the
// match no longer counts and w1 wins. Once that prefill has its first
// token it is no longer ahead, and the match counts again.
func prefillGuard(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	b := seqBlocks(1, 4)
	busy, _ := claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}}, scoring.Prompt{Blocks: b, PromptTokens: 100})
	a := scoring.Prompt{Blocks: b, PromptTokens: 100}
	for _, tc := range []struct {
		limit float64
		want  int
	}{{0, 0}, {1000, 0}, {120, 1}} {
		cands := []state.Candidate{
			{Worker: "w0", Cap: 8, Base: 1, LiveWeights: scoring.LiveWeights{Miss: 10, PrefillLimit: tc.limit}},
			{Worker: "w1", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 10, PrefillLimit: tc.limit}},
		}
		id, res := claimAff(t, s, cands, a)
		if res.Index != tc.want {
			t.Fatalf("limit %v: claimed %d (live %+v), want %d", tc.limit, res.Index, res.Live, tc.want)
		}
		release(t, s, id)
	}
	if err := s.FirstToken(context.Background(), busy); err != nil {
		t.Fatal(err)
	}
	// w1 holds the prefix too by now (the guarded claim went there): it
	// costs 1 more, so only w0's guard decides.
	cands := []state.Candidate{
		{Worker: "w0", Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 10, PrefillLimit: 120}},
		{Worker: "w1", Cap: 8, Base: 1, LiveWeights: scoring.LiveWeights{Miss: 10, PrefillLimit: 120}},
	}
	id, res := claimAff(t, s, cands, a)
	if res.Index != 0 {
		t.Fatalf("after the first token: claimed %d (live %+v), want 0: prefill past its first token is not ahead", res.Index, res.Live)
	}
	release(t, s, id)
	release(t, s, busy)
}
