package gpusim

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// withHead returns the blocks of a prompt of tokens tokens whose first
// shared blocks are head's and whose others are unique to base.
func withHead(head []uint64, shared, tokens int, base uint64) []uint64 {
	n := tokens / KVBlockTokens
	out := append([]uint64(nil), head[:min(shared, n)]...)
	for len(out) < n {
		out = append(out, base+uint64(len(out)))
	}
	return out
}

func TestPrefixCachingCalibrated(t *testing.T) {
	head := blocksOf(1, 200)
	prof, _ := LookupProfile("a100-llama3-8b")
	gap := time.Second // each request alone on the GPU
	tests := []struct {
		name       string
		prefix     bool
		blocks     [][]uint64
		wantCached []int
	}{
		{
			"identical prompts hit", true,
			[][]uint64{withHead(head, 200, 1000, 1e6), withHead(head, 200, 1000, 2e6)},
			[]int{0, 992},
		}, // (1000-1)/16 blocks: the last token is recomputed
		{
			"changed first block misses everything after it", true,
			[][]uint64{withHead(head, 200, 1000, 1e6), append([]uint64{1 << 40}, head[1:62]...)},
			[]int{0, 0},
		},
		{
			"hit length follows the shared head", true,
			[][]uint64{withHead(head, 62, 1000, 1e6), withHead(head, 10, 1000, 2e6), withHead(head, 40, 1000, 3e6)},
			[]int{0, 160, 640},
		},
		{
			"prefix cache off: no hits", false,
			[][]uint64{withHead(head, 200, 1000, 1e6), withHead(head, 200, 1000, 2e6)},
			[]int{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := simConfig(func(c *Config) { c.Profile, c.PrefixCache = prof.Name, tt.prefix })
			reqs := make([]SimRequest, len(tt.blocks))
			for i, b := range tt.blocks {
				reqs[i] = SimRequest{Arrival: time.Duration(i) * gap, PromptTokens: 1000, OutputTokens: 2, Blocks: b}
			}
			res, st, err := simulate(cfg, reqs, func(e *Engine) error { return e.checkInvariants() })
			if err != nil {
				t.Fatal(err)
			}
			hits := 0
			for i, r := range res {
				hits += r.CachedTokens
				if r.CachedTokens != tt.wantCached[i] {
					t.Errorf("request %d: %d cached tokens, want %d", i, r.CachedTokens, tt.wantCached[i])
				}
				// Alone on the GPU, TTFT is the prefill of the uncached
				// tokens (in chunks of 512) over the whole context.
				var want time.Duration
				for done := r.CachedTokens; done < 1000; done += 512 {
					n := min(512, 1000-done)
					want += prof.StepTime(n, done+n, 1)
				}
				if r.TTFT() != want {
					t.Errorf("request %d: TTFT %v, want %v", i, r.TTFT(), want)
				}
			}
			wantQueries := uint64(0)
			if tt.prefix {
				wantQueries = uint64(1000 * len(reqs))
			}
			if st.PrefixCacheHits != uint64(hits) || st.PrefixCacheQueries != wantQueries {
				t.Errorf("state counts %d hits of %d queries, want %d of %d", st.PrefixCacheHits, st.PrefixCacheQueries, hits, wantQueries)
			}
			if tt.prefix != (st.CachedBlocks > 0) || st.KVUsedTokens != 0 {
				t.Errorf("end state %+v", st)
			}
		})
	}
}

// TestPrefixCacheOffIsOldBehaviour: with --prefix-cache=false, a run with
// block hashes is the run without them, step for step.
func TestPrefixCacheOffIsOldBehaviour(t *testing.T) {
	shared := sharedLoad(120, 5)
	plain := make([]SimRequest, len(shared))
	for i, r := range shared {
		r.Blocks = nil
		plain[i] = r
	}
	off := simConfig(func(c *Config) { c.Profile, c.GPUMemUtil, c.PrefixCache = "a100-llama3-8b", 0.3, false })
	a, sa, err := Simulate(off, shared)
	if err != nil {
		t.Fatal(err)
	}
	on := off
	on.PrefixCache = true
	b, sb, err := Simulate(on, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || sa.Preemptions != sb.Preemptions || sa.PrefixCacheHits != 0 {
		t.Errorf("prefix cache off differs from a run without hashes: %+v vs %+v", sa, sb)
	}
}

// sharedLoad is a burst of long requests whose prompts start with one of
// four shared heads of random length, far beyond the KV cache.
func sharedLoad(n int, seed uint64) []SimRequest {
	rng := rand.New(rand.NewPCG(seed, seed))
	heads := [][]uint64{blocksOf(1e3, 400), blocksOf(2e3, 400), blocksOf(3e3, 400), blocksOf(4e3, 400)}
	reqs := make([]SimRequest, n)
	for i := range reqs {
		p := 1000 + rng.IntN(5000)
		reqs[i] = SimRequest{
			Arrival:      time.Duration(rng.Int64N(int64(2 * time.Second))),
			PromptTokens: p,
			OutputTokens: 100 + rng.IntN(1500),
			Blocks:       withHead(heads[rng.IntN(len(heads))], rng.IntN(p/KVBlockTokens+1), p, uint64(i+1)<<32),
		}
	}
	return reqs
}

// TestPrefixCachingInvariants checks the pool after every step of a run
// with sharing, concurrent computation of the same blocks, eviction and
// preemption: capacity is never exceeded and every reference is accounted.
func TestPrefixCachingInvariants(t *testing.T) {
	cfg := simConfig(func(c *Config) { c.Profile, c.GPUMemUtil = "a40-llama2-7b", 0.55 })
	reqs := sharedLoad(60, 11)
	steps, maxCached, evictions := 0, 0, 0
	res, st, err := simulate(cfg, reqs, func(e *Engine) error {
		steps++
		maxCached = max(maxCached, e.pool.cachedBlocks())
		evictions = e.pool.(*pagedPool).evictions
		return e.checkInvariants()
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Rejected || r.Tokens != reqs[i].OutputTokens {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	t.Logf("%d steps, %d preemptions, %d of %d prompt tokens hit, at most %d blocks cached, %d evicted",
		steps, st.Preemptions, st.PrefixCacheHits, st.PrefixCacheQueries, maxCached, evictions)
	if st.Preemptions == 0 || st.PrefixCacheHits == 0 || evictions == 0 || st.KVUsedTokens != 0 {
		t.Errorf("want preemptions, hits and evictions, nothing held at the end: %+v", st)
	}
}

func TestPagedPoolSharingAndLRU(t *testing.T) {
	p := newPagedPool(10*16, 16, true)
	mk := func(blocks []uint64, prompt int) *seq {
		return &seq{prompt: prompt, target: prompt, hashes: blocks[:CacheableBlocks(prompt, len(blocks))]}
	}
	run := func(s *seq) {
		t.Helper()
		if _, ok := p.admit(s, 1000); !ok {
			t.Fatal("admit failed")
		}
		s.computed = s.target
		p.computed(s)
		if err := p.check([]*seq{s}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := mk(blocksOf(100, 3), 49), mk(blocksOf(200, 3), 49)
	run(a)
	p.release(a)
	run(b)
	p.release(b)
	if p.cachedBlocks() != 6 || p.used() != 0 || p.empty() != 4 {
		t.Fatalf("cached %d used %d empty %d", p.cachedBlocks(), p.used(), p.empty())
	}
	// Two concurrent sequences on the same prompt: the second shares
	// nothing yet (the first has not computed it) and keeps private copies.
	c1, c2 := mk(blocksOf(300, 2), 33), mk(blocksOf(300, 2), 33)
	p.admit(c1, 1000)
	p.admit(c2, 1000)
	c1.computed, c2.computed = 33, 33
	p.computed(c1)
	p.computed(c2)
	if err := p.check([]*seq{c1, c2}); err != nil {
		t.Fatal(err)
	}
	if len(c1.kv) != 2 || len(c2.kv) != 0 || p.inUse != 6 {
		t.Errorf("c1 registered %d, c2 %d, in use %d", len(c1.kv), len(c2.kv), p.inUse)
	}
	// 6 held + 6 cached free > 10 blocks: a's blocks went first (freed
	// least recently), tail before head.
	if p.table[a.hashes[0]] == nil || p.table[a.hashes[2]] != nil || p.table[b.hashes[2]] == nil {
		t.Errorf("eviction order: a %v, b %v", p.table[a.hashes[0]] != nil, p.table[b.hashes[2]] != nil)
	}
	p.release(c2)
	p.release(c1)
	if err := p.check(nil); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixCachingSimple(t *testing.T) {
	ms := time.Millisecond
	a := withHead(blocksOf(1, 62), 62, 1000, 0)
	half := withHead(a, 31, 1000, 1e6)
	other := func(i uint64) []uint64 { return withHead(nil, 0, 1000, i<<32) }
	tests := []struct {
		name      string
		prefix    bool
		kvTokens  int
		blocks    [][]uint64
		wantTTFT  []time.Duration
		wantCache []int
	}{
		{
			"TTFT scales with the uncached share", true, 65536,
			[][]uint64{a, a, half},
			[]time.Duration{100 * ms, 800 * time.Microsecond, 50400 * time.Microsecond},
			[]int{0, 992, 496},
		},
		{
			"off: no hits", false, 65536,
			[][]uint64{a, a},
			[]time.Duration{100 * ms, 100 * ms},
			[]int{0, 0},
		},
		// 256 blocks, 63 of them the running request's: 193 cached at
		// most. The fourth prompt evicts the first's tail, its head stays.
		{
			"LRU under pressure, tail first", true, 4096,
			[][]uint64{a, other(1), other(2), other(3), a},
			[]time.Duration{100 * ms, 100 * ms, 100 * ms, 100 * ms, 88800 * time.Microsecond},
			[]int{0, 0, 0, 0, 112},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := simConfig(func(c *Config) {
				c.TTFTMs, c.TokensPerSecond, c.KVCapacityTokens, c.PrefixCache = 100, 0, tt.kvTokens, tt.prefix
			})
			reqs := make([]SimRequest, len(tt.blocks))
			for i, b := range tt.blocks {
				reqs[i] = SimRequest{Arrival: time.Duration(i) * time.Second, PromptTokens: 1000, OutputTokens: 3, Blocks: b}
			}
			res, st, err := simulate(cfg, reqs, func(e *Engine) error { return e.checkInvariants() })
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.TTFT() != tt.wantTTFT[i] || r.CachedTokens != tt.wantCache[i] {
					t.Errorf("request %d: TTFT %v with %d cached, want %v with %d", i, r.TTFT(), r.CachedTokens, tt.wantTTFT[i], tt.wantCache[i])
				}
			}
			if tt.prefix && (st.PrefixCacheQueries != uint64(1000*len(reqs)) || st.CachedBlocks == 0) {
				t.Errorf("state %+v", st)
			}
		})
	}
}
