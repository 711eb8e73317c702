package storetest

import (
	"context"
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Learned token limits (state.Limit.Tokens): a worker holding claims takes
// one more only while its in-flight tokens and the request's stay within
// the limit, on every replica, in claims and in grants to waiters.

// tokenLimit: claims from two replicas fill w0 to its token limit, the
// next goes to w1; a worker holding nothing takes a request past its limit
// (alone).
func tokenLimit(t *testing.T, s, peer state.Store) {
	register(t, s, workers(2, 8))
	putLimit(t, s, "w0", state.Limit{Tokens: 300})
	if got := limitOf(t, peer, "w0"); got.Tokens != 300 {
		t.Fatalf("peer sees limit %+v, want 300 tokens", got)
	}
	cands := []state.Candidate{{Worker: "w0", Cap: 8}, {Worker: "w1", Cap: 8, Base: 1}}
	a := scoring.Prompt{PromptTokens: 100, DecodeTokens: 50}
	var ids []string
	for i, st := range []state.Store{s, peer, s} {
		id, res := claimAff(t, st, cands, a)
		ids = append(ids, id)
		want := 0
		if i == 2 {
			want = 1 // 450 tokens would pass w0's 300
		}
		if res.Index != want {
			t.Fatalf("claim %d of 150 tokens under a 300-token limit: index %d, want %d", i, res.Index, want)
		}
	}
	for _, id := range ids {
		release(t, s, id)
	}
	alone := cands[:1]
	big, res := claimAff(t, peer, alone, scoring.Prompt{PromptTokens: 900, DecodeTokens: 100})
	if res.Index != 0 {
		t.Fatalf("an idle worker refused a request past its token limit: %+v", res)
	}
	if _, res := claimAff(t, s, alone, scoring.Prompt{PromptTokens: 1}); res.Index != -1 {
		t.Fatalf("a claim past the token limit landed: %+v", res)
	}
	release(t, s, big)
}

// tokenLimitMatch: a cached prefix lowers what a claim holds, so a warm
// worker takes a prompt its limit would refuse cold.
func tokenLimitMatch(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	one := []state.Candidate{{Worker: "w0", Cap: 8, LiveWeights: scoring.LiveWeights{KVBlocks: 1024}}}
	warm := scoring.Prompt{Blocks: seqBlocks(1, 8), PromptTokens: 200}
	claimAff(t, s, one, warm) // holds 200
	putLimit(t, s, "w0", state.Limit{Tokens: 300})
	// 8 blocks (128 tokens) cached: 72 more, 272 in all.
	if _, res := claimAff(t, s, one, warm); res.Index != 0 || res.Live[0].Match != 8 {
		t.Fatalf("a warm claim of 72 uncached tokens under the limit: %+v", res)
	}
	cold := scoring.Prompt{Blocks: seqBlocks(100, 8), PromptTokens: 200}
	if _, res := claimAff(t, s, one, cold); res.Index != -1 {
		t.Fatalf("a cold claim of 200 tokens past the limit landed: %+v", res)
	}
}

// tokenLimitWaiter: a waiter whose tokens do not fit waits, and is
// granted when the limit is raised.
func tokenLimitWaiter(t *testing.T, s state.Store) {
	register(t, s, workers(1, 8))
	putLimit(t, s, "w0", state.Limit{Tokens: 300})
	one := []state.Candidate{{Worker: "w0", Cap: 8}}
	claimAff(t, s, one, scoring.Prompt{PromptTokens: 200})
	n := subscribe(t, s, "r1")
	res, err := s.Claim(context.Background(), state.ClaimRequest{
		ID: "waiter-1", Candidates: one, Prompt: scoring.Prompt{PromptTokens: 150, DecodeTokens: 50},
		Queue: &state.QueueSpec{Model: "m", Priority: state.PriorityStandard, Allow: 4, Replica: "r1"},
	})
	if err != nil || !res.Queued {
		t.Fatalf("a request past the token limit was not queued: %+v %v", res, err)
	}
	if err := s.Pump(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(t, s)["w0"]; got != 1 {
		t.Fatalf("a pump granted the waiter past the token limit: %d in flight", got)
	}
	putLimit(t, s, "w0", state.Limit{Tokens: 400})
	if got := n.next(t); got.Waiter != "waiter-1" || got.Worker != "w0" {
		t.Fatalf("notice %+v, want waiter-1 granted w0", got)
	}
	if got := tokens(t, s)["w0"]; got != [2]int{350, 50} {
		t.Fatalf("tokens %v, want [350 50]", got)
	}
}
