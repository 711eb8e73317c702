package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Paired claims (state.PairClaimer): a decode worker and, when the prompt
// its prefix match leaves reaches the threshold, a prefill worker, both
// or neither, each counted in its worker's load and released on its own.

func runPair(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("PairDisaggregatesAnUncachedPromptAndKeepsACachedOneAggregated", func(t *testing.T) {
		s := newStore(t, def)
		pairDecides(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("PairPrefillPickFavoursPrefixHitsAndLittlePrefillAhead", func(t *testing.T) { pairPrefillPick(t, newStore(t, def)) })
	t.Run("PairIsBothOrNeither", func(t *testing.T) { pairBothOrNeither(t, newStore(t, def)) })
	t.Run("PairGlobalCapWithRoomForOneRunsAggregated", func(t *testing.T) {
		pairGlobalCap(t, newStore(t, state.Limits{Lease: 30 * time.Second, GlobalCap: 1}))
	})
	t.Run("PairReleasesEachClaimExactlyOnce", func(t *testing.T) { pairRelease(t, newStore(t, def)) })
	t.Run("PairPrefillWorkerDownRunsAggregated", func(t *testing.T) { pairPrefillDown(t, newStore(t, def)) })
	t.Run("PairWorkerLeavingAfterTheClaimLeaksNothing", func(t *testing.T) { pairWorkerLeaves(t, newStore(t, def)) })
}

// pairFleet registers decode workers d0, d1 and prefill workers p0, p1.
func pairFleet(t *testing.T, s state.Store) {
	register(t, s, []state.WorkerSpec{
		{ID: "d0", Address: "10.0.3.1:8000", Models: []string{"m"}, MaxConcurrency: 4, Role: state.RoleDecode},
		{ID: "d1", Address: "10.0.3.2:8000", Models: []string{"m"}, MaxConcurrency: 4, Role: state.RoleDecode},
		{ID: "p0", Address: "10.0.3.3:8000", Models: []string{"m"}, MaxConcurrency: 4, Role: state.RolePrefill},
		{ID: "p1", Address: "10.0.3.4:8000", Models: []string{"m"}, MaxConcurrency: 4, Role: state.RolePrefill},
	})
}

func decodeCands(ids ...string) []state.Candidate {
	out := make([]state.Candidate, len(ids))
	for i, id := range ids {
		out[i] = state.Candidate{Worker: id, Cap: 4, Slope: 1, LiveWeights: scoring.LiveWeights{KVBlocks: 1024}}
	}
	return out
}

// prefillCands score (ahead + uncached) tokens, as the scheduler's do at
// a rate of one token a second.
func prefillCands(ids ...string) []state.PrefillCandidate {
	out := make([]state.PrefillCandidate, len(ids))
	for i, id := range ids {
		out[i] = state.PrefillCandidate{Worker: id, Cap: 4, Slope: 1e-3, Ahead: 1, Uncached: 1, KVBlocks: 1024}
	}
	return out
}

// longPrompt is 64 blocks (1024 tokens) from first, 100 tokens of output.
func longPrompt(first uint64) scoring.Prompt {
	return scoring.Prompt{Blocks: seqBlocks(first, 64), PromptTokens: 1024, DecodeTokens: 100}
}

func claimPair(t *testing.T, s state.Store, decode []state.Candidate, prefill []state.PrefillCandidate, p scoring.Prompt, minUncached int) (string, state.PairResult) {
	t.Helper()
	id := claimID()
	res, err := s.ClaimPair(context.Background(), state.PairRequest{
		ClaimRequest: state.ClaimRequest{ID: id, Candidates: decode, Prompt: p},
		Prefill:      prefill, MinUncached: minUncached,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, res
}

// load is a worker's in-flight count and tokens as a snapshot shows them.
type load struct{ inFlight, prefill, decode, ahead int }

func loads(t *testing.T, s state.Store) map[string]load {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]load{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = load{w.InFlight, w.PrefillTokens, w.DecodeTokens, w.AheadTokens}
	}
	return out
}

func wantLoads(t *testing.T, s state.Store, want map[string]load) {
	t.Helper()
	got := loads(t, s)
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("%s holds %+v, want %+v (all: %+v)", id, got[id], w, got)
		}
	}
}

// pairDecides: an uncached long prompt is disaggregated (the decode worker
// holds its KV and output as decode, the prefill worker its prompt as
// prefill ahead); the same prompt again, now cached on the decode worker
// it lands on, runs aggregated; a short prompt never reads the prefill
// workers; a mostly cached one stays aggregated.
func pairDecides(t *testing.T, s, peer state.Store) {
	pairFleet(t, s)
	p := longPrompt(1000)
	_, res := claimPair(t, s, decodeCands("d0"), prefillCands("p0", "p1"), p, 256)
	if res.Index != 0 || res.PrefillIndex != 0 || !res.Disaggregated() || res.Uncached != 1024 {
		t.Fatalf("uncached long prompt: %+v, want d0 with p0 (ties to the earlier), 1024 uncached", res)
	}
	if len(res.PrefillLive) != 2 || !res.PrefillAvailable[0] || !res.PrefillAvailable[1] {
		t.Fatalf("prefill candidates not read: %+v", res)
	}
	wantLoads(t, s, map[string]load{
		"d0": {inFlight: 1, decode: 1024 + 100},
		"p0": {inFlight: 1, prefill: 1024, ahead: 1024},
		"p1": {},
	})
	// The same prompt from another replica: d0's index holds it.
	_, res = claimPair(t, peer, decodeCands("d0"), prefillCands("p0", "p1"), p, 256)
	if res.Index != 0 || res.Disaggregated() || res.Uncached != 0 || res.PrefillLive != nil {
		t.Fatalf("cached prompt: %+v, want aggregated on d0 with nothing uncached and the prefill workers unread", res)
	}
	// A prompt under the threshold stays on its decode worker, prefilled
	// there.
	_, res = claimPair(t, s, decodeCands("d1"), prefillCands("p0", "p1"), scoring.Prompt{Blocks: seqBlocks(5000, 8), PromptTokens: 128, DecodeTokens: 10}, 256)
	if res.Index != 0 || res.Disaggregated() || res.Uncached != 128 {
		t.Fatalf("short prompt: %+v, want aggregated with 128 uncached", res)
	}
	wantLoads(t, s, map[string]load{
		"d0": {inFlight: 2, decode: 1024 + 100 + 100},
		"d1": {inFlight: 1, prefill: 128, decode: 10, ahead: 128},
		"p0": {inFlight: 1, prefill: 1024, ahead: 1024},
	})
	// A mostly cached prompt (1,024 of its 1,536 tokens on d0) stays
	// aggregated though its 512 uncached pass the threshold.
	more := scoring.Prompt{Blocks: append(seqBlocks(1000, 64), seqBlocks(1500, 32)...), PromptTokens: 1536, DecodeTokens: 10}
	_, res = claimPair(t, s, decodeCands("d0"), prefillCands("p0", "p1"), more, 256)
	if res.Index != 0 || res.Disaggregated() || res.Uncached != 512 {
		t.Fatalf("mostly cached prompt: %+v, want aggregated on d0 with 512 uncached", res)
	}
}

// pairPrefillPick: the prefill worker that has the prompt's prefix wins
// over an idle cold one; with no prefix anywhere, the one with less
// prefill ahead wins.
func pairPrefillPick(t *testing.T, s state.Store) {
	pairFleet(t, s)
	p := longPrompt(2000)
	// Warm p1 with the prompt (it alone offered), then end both claims.
	id, res := claimPair(t, s, decodeCands("d0"), prefillCands("p1"), p, 256)
	if res.PrefillIndex != 0 {
		t.Fatalf("warm-up: %+v", res)
	}
	release(t, s, id)
	release(t, s, state.PrefillClaimID(id))
	// A prompt sharing its first half, on d1 (cold): p1's match wins.
	half := scoring.Prompt{Blocks: append(seqBlocks(2000, 32), seqBlocks(2500, 32)...), PromptTokens: 1024, DecodeTokens: 100}
	_, res = claimPair(t, s, decodeCands("d1"), prefillCands("p0", "p1"), half, 256)
	if res.PrefillIndex != 1 || res.PrefillLive[1].Match != 32 {
		t.Fatalf("prefix hit on p1: %+v, want p1 with 32 blocks matched", res)
	}
	wantLoads(t, s, map[string]load{"p1": {inFlight: 1, prefill: 512, ahead: 512}})
	// p1 now has 512 tokens of prefill ahead; a cold prompt goes to p0,
	// which has none, though offered second.
	_, res = claimPair(t, s, decodeCands("d0"), prefillCands("p1", "p0"), longPrompt(9000), 256)
	if res.PrefillIndex != 1 || res.PrefillLive[0].Ahead != 512 {
		t.Fatalf("prefill ahead on p1: %+v, want p0", res)
	}
}

// pairBothOrNeither: with every decode worker full nothing is claimed,
// prefill workers included.
func pairBothOrNeither(t *testing.T, s state.Store) {
	pairFleet(t, s)
	full := []state.Candidate{{Worker: "d0", Cap: 1, Slope: 1}}
	if _, res := claimPair(t, s, full, prefillCands("p0"), longPrompt(3000), 256); !res.Disaggregated() {
		t.Fatalf("first pair: %+v", res)
	}
	_, res := claimPair(t, s, full, prefillCands("p0", "p1"), longPrompt(4000), 256)
	if res.Index != -1 || res.Disaggregated() {
		t.Fatalf("decode worker full: %+v, want neither claimed", res)
	}
	wantLoads(t, s, map[string]load{"p0": {inFlight: 1, prefill: 1024, ahead: 1024}, "p1": {}})
	// A full prefill worker is skipped like any other.
	pcs := prefillCands("p0")
	pcs[0].Cap = 1
	_, res = claimPair(t, s, decodeCands("d1"), pcs, longPrompt(5000), 256)
	if res.Index != 0 || res.Disaggregated() {
		t.Fatalf("prefill worker full: %+v, want d1 aggregated", res)
	}
	wantLoads(t, s, map[string]load{"d1": {inFlight: 1, prefill: 1024, decode: 100, ahead: 1024}, "p0": {inFlight: 1, prefill: 1024, ahead: 1024}})
}

// pairGlobalCap: a fleet-wide cap with room for one claim takes the
// decode worker alone.
func pairGlobalCap(t *testing.T, s state.Store) {
	pairFleet(t, s)
	_, res := claimPair(t, s, decodeCands("d0"), prefillCands("p0"), longPrompt(6000), 256)
	if res.Index != 0 || res.Disaggregated() {
		t.Fatalf("global cap 1: %+v, want d0 aggregated", res)
	}
	wantLoads(t, s, map[string]load{"d0": {inFlight: 1, prefill: 1024, decode: 100, ahead: 1024}, "p0": {}})
}

// pairRelease: each claim of a pair is released on its own id, exactly
// once, giving back exactly what it held; the prefill claim's first token
// clears its prefill ahead.
func pairRelease(t *testing.T, s state.Store) {
	pairFleet(t, s)
	ctx := context.Background()
	id, res := claimPair(t, s, decodeCands("d0"), prefillCands("p0"), longPrompt(7000), 256)
	if !res.Disaggregated() {
		t.Fatalf("pair: %+v", res)
	}
	pid := state.PrefillClaimID(id)
	if err := s.FirstToken(ctx, pid); err != nil {
		t.Fatal(err)
	}
	wantLoads(t, s, map[string]load{"p0": {inFlight: 1, prefill: 1024}})
	release(t, s, pid)
	wantLoads(t, s, map[string]load{"p0": {}, "d0": {inFlight: 1, decode: 1124}})
	if ok, err := s.Release(ctx, state.Release{ID: pid}); err != nil || ok {
		t.Fatalf("second release of the prefill claim: %v %v, want not held", ok, err)
	}
	release(t, s, id)
	if ok, err := s.Release(ctx, state.Release{ID: id}); err != nil || ok {
		t.Fatalf("second release of the decode claim: %v %v, want not held", ok, err)
	}
	wantLoads(t, s, map[string]load{"p0": {}, "d0": {}})
}

// pairPrefillDown: prefill workers that turned unhealthy or draining since
// the scheduler's snapshot are skipped inside the claim: the request runs
// aggregated and holds what an aggregated claim holds.
func pairPrefillDown(t *testing.T, s state.Store) {
	pairFleet(t, s)
	ctx := context.Background()
	if err := s.SetHealth(ctx, "p0", scoring.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDraining(ctx, "p1", true); err != nil {
		t.Fatal(err)
	}
	_, res := claimPair(t, s, decodeCands("d0"), prefillCands("p0", "p1", "gone"), longPrompt(8000), 256)
	if res.Index != 0 || res.Disaggregated() || len(res.PrefillAvailable) != 3 || res.PrefillAvailable[0] || res.PrefillAvailable[1] || res.PrefillAvailable[2] {
		t.Fatalf("prefill workers down: %+v, want d0 aggregated, none available", res)
	}
	wantLoads(t, s, map[string]load{"d0": {inFlight: 1, prefill: 1024, decode: 100, ahead: 1024}, "p0": {}, "p1": {}})
}

// pairWorkerLeaves: a worker of a held pair leaves the fleet; both claims
// still release once and the other worker's counts go back to zero.
func pairWorkerLeaves(t *testing.T, s state.Store) {
	pairFleet(t, s)
	ctx := context.Background()
	a, res := claimPair(t, s, decodeCands("d0"), prefillCands("p0"), longPrompt(10000), 256)
	b, res2 := claimPair(t, s, decodeCands("d1"), prefillCands("p1"), longPrompt(11000), 256)
	if !res.Disaggregated() || !res2.Disaggregated() {
		t.Fatalf("pairs: %+v %+v", res, res2)
	}
	if err := s.Deregister(ctx, "p0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Deregister(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, state.PrefillClaimID(a), b, state.PrefillClaimID(b)} {
		release(t, s, id)
	}
	wantLoads(t, s, map[string]load{"d0": {}, "p1": {}})
}
