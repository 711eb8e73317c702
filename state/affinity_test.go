package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/internal/prefix"
)

func TestBlockTokensIsThePrefixBlock(t *testing.T) {
	if BlockTokens != prefix.BlockTokens {
		t.Fatalf("state.BlockTokens %d, prefix.BlockTokens %d", BlockTokens, prefix.BlockTokens)
	}
}

func TestClaimScriptStride(t *testing.T) {
	if want := fmt.Sprintf("local STRIDE = %d\n", IndexStride); !strings.Contains(luaClaim, want) {
		t.Fatalf("claim.lua lacks %q", want)
	}
	if want := fmt.Sprintf("%d * redis.call('ZCARD'", IndexStride); !strings.Contains(luaSnapshot, want) {
		t.Fatalf("snapshot.lua lacks %q", want)
	}
}

func TestMatchLenFindsTheLeadingRun(t *testing.T) {
	for n := 0; n <= 9; n++ {
		for run := 0; run <= n; run++ {
			calls := 0
			got := matchLen(n, func(i int) bool { calls++; return i < run })
			if got != run {
				t.Fatalf("n=%d run=%d: got %d", n, run, got)
			}
			if n > 0 && calls > 2+bitsLen(n) {
				t.Fatalf("n=%d: %d lookups, want O(log n)", n, calls)
			}
		}
	}
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
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
