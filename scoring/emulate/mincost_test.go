package emulate

import (
	"math"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

func TestPrefixOverlapMinCostArithmetic(t *testing.T) {
	a := seq(1, 10)
	type claim struct {
		id     string
		job    scoring.Job
		worker string
		at     time.Duration
	}
	tests := []struct {
		name   string
		claims []claim
		free   []string // claims released before the decision
		req    scoring.Job
		at     time.Duration
		// Expected terms on w1.
		overlap, prefill, decode float64
		want                     string
	}{
		{
			name: "idle, nothing cached: prompt blocks twice",
			req:  job(a), overlap: 0, prefill: 10, decode: 10,
		},
		{
			// The first request's 160 tokens are still prefilling; 6 of
			// this request's 10 blocks are cached and shared with it.
			name:   "cached prefix shared with a running request",
			claims: []claim{{"r1", job(a[:6], seq(2, 4)), "w1", 0}},
			req:    job(a), overlap: 6, prefill: 10 + 4, decode: 10 + 4, want: "w2",
		},
		{
			name:   "once released only the cache remains",
			claims: []claim{{"r1", job(a[:6], seq(2, 4)), "w1", 0}}, free: []string{"r1"},
			req: job(a), overlap: 6, prefill: 4, decode: 10, want: "w1",
		},
		{
			name:   "the partial last block counts as a block of its own",
			claims: []claim{{"r1", scoring.Job{Model: "m", Blocks: a[:2], PromptTokens: 40}, "w1", 0}},
			req:    scoring.Job{Model: "m", Blocks: a[:2], PromptTokens: 40},
			// r1's 40 tokens prefill (nothing was cached); this one's 40−32.
			// Blocks: r1's 2 hashed + 1 partial, and this one's partial.
			overlap: 2, prefill: (40 + 8) / 16.0, decode: 3 + 1, want: "w2",
		},
		{
			name:   "after 120 s a routed prefix is no longer assumed cached",
			claims: []claim{{"r1", job(a), "w1", 0}}, free: []string{"r1"},
			req: job(a), at: 121 * time.Second, overlap: 0, prefill: 10, decode: 10,
		},
		{
			name:   "routed again, the prefix's 120 s start again",
			claims: []claim{{"r1", job(a), "w1", 0}, {"r2", job(a), "w1", 100 * time.Second}}, free: []string{"r1", "r2"},
			req: job(a), at: 200 * time.Second, overlap: 10, prefill: 0, decode: 10, want: "w1",
		},
		{
			name:   "more tokens cached than the estimate: no negative prefill",
			claims: []claim{{"r1", job(a), "w1", 0}}, free: []string{"r1"},
			req: scoring.Job{Model: "m", Blocks: a, PromptTokens: 100}, overlap: 10, prefill: 0, decode: 10, want: "w1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newPrefixOverlapMinCost()
			for _, c := range tc.claims {
				s.Claimed(c.id, c.job, c.worker, t0.Add(c.at))
			}
			for _, id := range tc.free {
				s.Released(id, t0.Add(tc.at))
			}
			got, cands := pick(t, s, tc.req, t0.Add(tc.at), fleet(2))
			if tc.want != "" && got != tc.want {
				t.Errorf("picked %s, want %s", got, tc.want)
			}
			o, p, d := term(t, cands, "w1", "overlap_blocks"), term(t, cands, "w1", "prefill_blocks"), term(t, cands, "w1", "decode_blocks")
			if o != tc.overlap || math.Abs(p-tc.prefill) > 1e-9 || d != tc.decode {
				t.Errorf("overlap %g prefill %g decode %g, want %g %g %g", o, p, d, tc.overlap, tc.prefill, tc.decode)
			}
			for _, c := range cands {
				if c.Worker == "w1" && math.Abs(c.Curve.Base-(dynOverlapWeight*p+d)) > 1e-9 {
					t.Errorf("cost %g, want %g·%g + %g", c.Curve.Base, dynOverlapWeight, p, d)
				}
			}
		})
	}
}

func TestPrefixOverlapMinCostReleaseRestoresTheLoad(t *testing.T) {
	s := newPrefixOverlapMinCost()
	jobs := []scoring.Job{job(seq(1, 10)), job(seq(1, 10)), job(seq(2, 3))}
	for i, j := range jobs {
		s.Claimed(string(rune('a'+i)), j, "w1", t0)
	}
	for i := range jobs {
		s.Released(string(rune('a'+i)), t0)
	}
	s.Released("a", t0) // twice: no effect
	if len(s.active) != 0 || len(s.routed) != 0 {
		t.Fatalf("load left after every release: %v %v", s.active, s.routed)
	}
}

func TestPrefixOverlapMinCostPrunesTheOldest(t *testing.T) {
	s := newPrefixOverlapMinCost()
	s.maxEntries = 10
	s.Claimed("r1", job(seq(1, 8)), "w1", t0)
	s.Claimed("r2", job(seq(2, 8)), "w2", t0.Add(time.Second)) // 16 > 10: prune to 8
	if s.size != 8 || len(s.cached["w1"]) != 0 || len(s.cached["w2"]) != 8 {
		t.Fatalf("size %d, w1 %d, w2 %d: want the older worker's entries pruned", s.size, len(s.cached["w1"]), len(s.cached["w2"]))
	}
	// Expiry drops everything 120 s after it was routed, and the queue with it.
	_, _ = pick(t, s, job(seq(2, 8)), t0.Add(122*time.Second), fleet(2))
	if s.size != 0 || len(s.queue)-s.head != 0 || len(s.cached) != 0 {
		t.Fatalf("after the TTL: size %d, queue %d, workers %d", s.size, len(s.queue)-s.head, len(s.cached))
	}
}
