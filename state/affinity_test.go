package state

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llm-router/llm-router/scoring/prefix"
)

func TestBlockTokensIsThePrefixBlock(t *testing.T) {
	if BlockTokens != prefix.BlockTokens {
		t.Fatalf("state.BlockTokens %d, prefix.BlockTokens %d", BlockTokens, prefix.BlockTokens)
	}
}

func TestAffinityScore(t *testing.T) {
	a := Affinity{Blocks: make([]uint64, 4), PromptTokens: 100, DecodeTokens: 10}
	c := Candidate{Prefix: 8, TokenLoad: 0.5}
	// Half matched: 32 of 100 tokens cached, 68 uncached.
	if got, want := c.AffinityScore(a, Live{Match: 2, Prefill: 10, Decode: 20}), 8*0.5+0.5*(10+20+68); got != want {
		t.Fatalf("score %v, want %v", got, want)
	}
	c.PrefillLimit = 50 // 10 + 68 > 50: the match yields
	if got, want := c.AffinityScore(a, Live{Match: 2, Prefill: 10, Decode: 20}), 8+0.5*(10+20+100); got != want {
		t.Fatalf("guarded score %v, want %v", got, want)
	}
}

// TestAffinityBoundsHoldForEveryMatch: AffinityBounds brackets
// AffinityScore at every match a lookup can return (a leading run of
// whole index groups), load guard included, so a claim that skips the
// lookups the bounds rule out picks what a full evaluation would.
func TestAffinityBoundsHoldForEveryMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		c := Candidate{Prefix: rng.Float64() * 200, TokenLoad: rng.Float64() * 2, PrefixTrust: rng.Float64()}
		if rng.IntN(2) == 0 {
			c.PrefillLimit = float64(rng.IntN(8000))
		}
		a := Affinity{Blocks: make([]uint64, rng.IntN(300)), PromptTokens: rng.IntN(5000), DecodeTokens: rng.IntN(500)}
		p, d := rng.IntN(8000), rng.IntN(8000)
		lo, hi := c.AffinityBounds(a, p, d)
		for m := 0; m <= len(a.Blocks); m += IndexStride {
			s := c.AffinityScore(a, Live{Match: m, Prefill: p, Decode: d})
			if s < lo-1e-9 || s > hi+1e-9 {
				t.Fatalf("%+v %d blocks %d prompt, load %d/%d, match %d: score %v outside [%v, %v]", c, len(a.Blocks), a.PromptTokens, p, d, m, s, lo, hi)
			}
		}
	}
	neg := Candidate{Prefix: -1}
	if lo, hi := neg.AffinityBounds(Affinity{Blocks: make([]uint64, 8)}, 0, 0); !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Errorf("negative weight: bounds [%v, %v], want infinite", lo, hi)
	}
}
