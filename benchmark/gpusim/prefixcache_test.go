package gpusim

import "testing"

// blocksOf returns n distinct chained-looking hashes starting at base.
func blocksOf(base uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

func TestCacheableBlocks(t *testing.T) {
	tests := []struct{ prompt, hashed, want int }{
		{0, 5, 0},
		{1, 5, 0},
		{16, 1, 0}, // the last token is always recomputed
		{17, 1, 1},
		{33, 2, 2},
		{1000, 3, 3}, // never more than hashed
		{48, 10, 2},
	}
	for _, tt := range tests {
		if got := CacheableBlocks(tt.prompt, tt.hashed); got != tt.want {
			t.Errorf("CacheableBlocks(%d, %d) = %d, want %d", tt.prompt, tt.hashed, got, tt.want)
		}
	}
}

func TestPrefixCacheAccess(t *testing.T) {
	a := blocksOf(100, 4)
	changedFirst := append([]uint64{999}, a[1:]...)
	longer := append(blocksOf(100, 4), 7, 8)
	tests := []struct {
		name    string
		seq     [][]uint64
		prompts []int
		want    []int // hit tokens of each access
	}{
		{"identical prompts hit", [][]uint64{a, a}, []int{65, 65}, []int{0, 64}},
		{"last token never cached", [][]uint64{a, a}, []int{64, 64}, []int{0, 48}},
		{"changed first block misses all", [][]uint64{a, changedFirst}, []int{65, 65}, []int{0, 0}},
		{"longer prompt hits the shared head", [][]uint64{a, longer}, []int{65, 97}, []int{0, 64}},
		{"no blocks, no hits", [][]uint64{nil, nil}, []int{10, 10}, []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewPrefixCache(0)
			var queries, hits int
			for i, b := range tt.seq {
				got := c.Access(b, tt.prompts[i])
				if got != tt.want[i] {
					t.Errorf("access %d: %d hit tokens, want %d", i, got, tt.want[i])
				}
				queries += tt.prompts[i]
				hits += got
			}
			if c.Queries() != uint64(queries) || c.Hits() != uint64(hits) {
				t.Errorf("counted %d/%d, want %d/%d", c.Hits(), c.Queries(), hits, queries)
			}
		})
	}
}

func TestPrefixCacheLRU(t *testing.T) {
	c := NewPrefixCache(6)
	a, b := blocksOf(100, 3), blocksOf(200, 3)
	c.Access(a, 100)
	c.Access(b, 100)
	c.Access(a, 100) // a is now the most recent
	c.Access(blocksOf(300, 2), 100)
	// b's tail went first (b[2], then b[1]): a prompt's tail is evicted
	// before its head.
	if c.Len() != 6 || c.Match(a) != 3 || c.Match(b) != 1 {
		t.Errorf("len %d, a matches %d (want 3), b %d (want 1)", c.Len(), c.Match(a), c.Match(b))
	}
	c.setCapacity(2)
	if c.Len() != 2 || c.Match(a) != 0 {
		t.Errorf("after shrink: len %d, a matches %d", c.Len(), c.Match(a))
	}
	c.setCapacity(0)
	if c.Len() != 0 || c.Access(a, 100) != 0 || c.Len() != 0 {
		t.Errorf("a cache of no block keeps nothing: len %d", c.Len())
	}
	if r := c.HitRate(); r <= 0 || r >= 1 {
		t.Errorf("hit rate %v", r)
	}
}

func TestKVCapacityBlocks(t *testing.T) {
	p, err := LookupProfile("a40-llama2-7b")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.KVCapacityBlocks(0.9), p.KVCapacityTokens(0.9, KVBlockTokens)/KVBlockTokens; got != want || got == 0 {
		t.Errorf("KVCapacityBlocks %d, want %d", got, want)
	}
}
