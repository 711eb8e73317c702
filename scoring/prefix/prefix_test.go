package prefix

import (
	"strings"
	"testing"
)

func blocks(parts ...string) []uint64 {
	var h Hasher
	for _, p := range parts {
		h.WriteString(p)
	}
	return append([]uint64(nil), h.Blocks()...)
}

func TestSharedPrefixSharesBlocks(t *testing.T) {
	base := strings.Repeat("a", 3*BlockBytes)
	a := blocks(base, "xxxx", strings.Repeat("b", 2*BlockBytes))
	b := blocks(base, "yyyy", strings.Repeat("b", 2*BlockBytes))
	if len(a) != 5 || len(b) != 5 {
		t.Fatalf("blocks: %d and %d, want 5", len(a), len(b))
	}
	if m := Match(a, b); m != 3 {
		t.Errorf("match %d, want 3 (the blocks after a difference differ, chained)", m)
	}
	// The same bytes cut into different writes give the same blocks.
	c := blocks(base[:10], base[10:]+"xxxx", strings.Repeat("b", BlockBytes), strings.Repeat("b", BlockBytes))
	if Match(a, c) != 5 {
		t.Errorf("write boundaries changed the hashes")
	}
}

func TestFirstBlockChangeMissesAll(t *testing.T) {
	a := blocks("Z" + strings.Repeat("a", 4*BlockBytes))
	b := blocks("Y" + strings.Repeat("a", 4*BlockBytes))
	if m := Match(a, b); m != 0 {
		t.Errorf("match %d, want 0: identical later blocks must not match after a different first one", m)
	}
}

func TestPartialBlockNotHashedAndMaxBounds(t *testing.T) {
	var h Hasher
	h.WriteString(strings.Repeat("a", 2*BlockBytes+BlockBytes-1))
	if len(h.Blocks()) != 2 || h.Tokens() != (3*BlockBytes-1)/BytesPerToken {
		t.Errorf("blocks %d tokens %d", len(h.Blocks()), h.Tokens())
	}
	m := Hasher{Max: 3}
	m.WriteString(strings.Repeat("a", 10*BlockBytes))
	if len(m.Blocks()) != 3 || m.Bytes() != 10*BlockBytes {
		t.Errorf("bounded: %d blocks, %d bytes", len(m.Blocks()), m.Bytes())
	}
	if Tokens(0) != 0 || Tokens(1) != 1 {
		t.Error("Tokens bounds")
	}
}

func BenchmarkHash256KB(b *testing.B) {
	p := []byte(strings.Repeat("lorem ipsum ", 256<<10/12))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		var h Hasher
		h.Write(p)
	}
}

func TestWriteStringAndGrow(t *testing.T) {
	s := strings.Repeat("abcdefg", 3*BlockBytes)
	var a, b Hasher
	a.Write([]byte(s))
	b.Grow(len(s))
	b.WriteString(s[:5])
	b.WriteString(s[5:])
	if Match(a.Blocks(), b.Blocks()) != len(a.Blocks()) || len(a.Blocks()) != len(b.Blocks()) {
		t.Fatal("WriteString and Write disagree")
	}
	if cap(b.Blocks()) != len(b.Blocks()) {
		t.Errorf("Grow reserved %d, used %d", cap(b.Blocks()), len(b.Blocks()))
	}
	if n := testing.AllocsPerRun(10, func() {
		h := Hasher{Max: 4}
		h.Grow(len(s))
		h.WriteString(s)
	}); n > 1 {
		t.Errorf("%v allocations, want at most 1 (the blocks)", n)
	}
}

func TestForAdapter(t *testing.T) {
	a := []uint64{1, 2, 3}
	b := []uint64{1, 2, 9}
	if got := ForAdapter("", a); &got[0] != &a[0] {
		t.Fatal("no adapter: the blocks must be returned as they are")
	}
	sa, sb := ForAdapter("sql", a), ForAdapter("sql", b)
	if Match(sa, sb) != 2 {
		t.Fatalf("one adapter: match %d; want the shared 2 blocks", Match(sa, sb))
	}
	if Match(ForAdapter("chat", a), sa) != 0 || Match(a, sa) != 0 {
		t.Fatal("two adapters, or an adapter and its base, share blocks")
	}
	if a[0] != 1 {
		t.Fatal("ForAdapter modified its input")
	}
}
