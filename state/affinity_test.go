package state

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/prefix"
)

func TestBlockTokensIsThePrefixBlock(t *testing.T) {
	if BlockTokens != prefix.BlockTokens {
		t.Fatalf("state.BlockTokens %d, prefix.BlockTokens %d", BlockTokens, prefix.BlockTokens)
	}
}

func TestFullMatchIsWholeGroups(t *testing.T) {
	for n, want := range map[int]int{0: 0, 3: 0, 4: 4, 9: 8} {
		if got := FullMatch(scoring.Prompt{Blocks: make([]uint64, n)}); got != want {
			t.Errorf("%d blocks: full match %d, want %d", n, got, want)
		}
	}
}
