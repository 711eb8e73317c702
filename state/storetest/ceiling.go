package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// runCeiling checks LiveWeights.Ceiling: a candidate whose live score
// passes it is skipped as if full, consistently with the bounds that spare
// match lookups.
func runCeiling(t *testing.T, newStore Factory) {
	def := state.Limits{Lease: 30 * time.Second}
	t.Run("CeilingSkipsAsIfFull", func(t *testing.T) { ceilingSkips(t, newStore(t, def)) })
	t.Run("CeilingWithBoundedLookups", func(t *testing.T) { ceilingBounds(t, newStore(t, def)) })
	t.Run("StallOutsideTheCeiling", func(t *testing.T) { stallOutside(t, newStore(t, def)) })
}

// stallOutside: the Stall part of a live score counts in the pick but not
// against the ceiling. Both workers are idle; w0 has the prompt's 8 blocks
// (128 tokens) cached, w1 none. With Stall 1 and a ceiling of 50, w1's
// live score is 128 (all Stall): under its ceiling, so with w0 out of the
// candidates it is claimed, not queued; with both, w0 (live 0) wins
// though its curve is 100 higher, the Stall part of w1 being 128.
func stallOutside(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	blocks := seqBlocks(1, 8)
	matchOn(t, s, "w0", 0, blocks)
	lw := scoring.LiveWeights{Stall: 1, Ceiling: 50}
	p := scoring.Prompt{Blocks: blocks, PromptTokens: 128}
	// Other blocks, so that w1's index stays cold to p's.
	id, res := claimAff(t, s, []state.Candidate{{Worker: "w1", Cap: 8, LiveWeights: lw}}, scoring.Prompt{Blocks: seqBlocks(100, 8), PromptTokens: 128})
	if res.Index != 0 {
		t.Fatalf("w1 alone, its stall past the ceiling but not its bounded part: index %d, live %+v; want w1", res.Index, res.Live)
	}
	release(t, s, id)
	cands := []state.Candidate{{Worker: "w1", Cap: 8, LiveWeights: lw}, {Worker: "w0", Cap: 8, Base: 100, LiveWeights: lw}}
	id, res = claimAff(t, s, cands, p)
	if res.Index != 1 || res.Live[1].Match != 8 {
		t.Fatalf("index %d, live %+v; want w0, warm", res.Index, res.Live)
	}
	release(t, s, id)
}

// ceilingSkips: w0 has 100 tokens ahead, past its ceiling of 50: the claim
// goes to w1 however high its curve; with w0 alone the request queues.
func ceilingSkips(t *testing.T, s state.Store) {
	register(t, s, workers(2, 8))
	busy, _ := claimAff(t, s, []state.Candidate{{Worker: "w0", Cap: 8}}, scoring.Prompt{PromptTokens: 100})
	lw := scoring.LiveWeights{Ahead: 1, Ceiling: 50}
	cands := []state.Candidate{{Worker: "w0", Cap: 8, LiveWeights: lw}, {Worker: "w1", Cap: 8, Base: 1000, LiveWeights: lw}}
	a := scoring.Prompt{PromptTokens: 10}
	id, res := claimAff(t, s, cands, a)
	if res.Index != 1 {
		t.Fatalf("w0 past its ceiling: index %d, live %+v; want w1", res.Index, res.Live)
	}
	release(t, s, id)
	res, err := s.Claim(context.Background(), state.ClaimRequest{
		ID: "ceiling-waiter", Candidates: cands[:1], Prompt: a,
		Queue: &state.QueueSpec{Model: "m", Priority: state.PriorityStandard, Allow: 4, Replica: "r"},
	})
	if err != nil || res.Index != -1 || !res.Queued {
		t.Fatalf("every candidate past its ceiling: %+v %v; want queued", res, err)
	}
	if st, err := s.Cancel(context.Background(), "ceiling-waiter"); err != nil || st.State != state.WaiterRemoved {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	// Under the ceiling once the request ahead had its first token.
	firstToken(t, s, busy)
	id, res = claimAff(t, s, cands, a)
	if res.Index != 0 {
		t.Fatalf("w0 under its ceiling: index %d, live %+v; want w0", res.Index, res.Live)
	}
	release(t, s, id)
	release(t, s, busy)
}

// ceilingBounds: w0 has the cheapest curve but is cold, so its live score
// (128 uncached tokens) passes the ceiling of 100; it must not bound the
// lookups, or w1, warm (its full match leaves nothing uncached) but with a
// curve of 200, would never be looked up. w2 is past its ceiling even with
// a full match (150 tokens ahead): out, its load reported, not looked up.
func ceilingBounds(t *testing.T, s state.Store) {
	register(t, s, workers(3, 8))
	blocks := seqBlocks(1, 8)
	matchOn(t, s, "w1", 0, blocks)
	busy, _ := claimAff(t, s, []state.Candidate{{Worker: "w2", Cap: 8}}, scoring.Prompt{PromptTokens: 150})
	lw := scoring.LiveWeights{Uncached: 1, Ahead: 1, Ceiling: 100}
	cands := []state.Candidate{
		{Worker: "w0", Cap: 8, LiveWeights: lw},
		{Worker: "w1", Cap: 8, Base: 200, LiveWeights: lw},
		{Worker: "w2", Cap: 8, LiveWeights: lw},
	}
	id, res := claimAff(t, s, cands, scoring.Prompt{Blocks: blocks, PromptTokens: 128})
	if res.Index != 1 || res.Live[1].Match != 8 || res.Live[1].Unread || res.Live[0].Unread {
		t.Fatalf("index %d, live %+v; want w1 with its 8 blocks, w0 looked up", res.Index, res.Live)
	}
	if l := res.Live[2]; l != (scoring.Live{Prefill: 150, Ahead: 150}) {
		t.Fatalf("w2 past its ceiling read %+v; want its load, no lookup", l)
	}
	release(t, s, id)
	release(t, s, busy)
}
