package emulate

import (
	"fmt"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

func TestPrefixMatchOrShortestQueue(t *testing.T) {
	a := seq(1, 10)
	tests := []struct {
		name    string
		running map[string]int      // in-flight requests routed by this replica
		routed  map[string][]uint64 // blocks in each worker's tree
		req     scoring.Job
		want    string
		rule    string // the term that decided
	}{
		{
			name: "balanced, match above 0.3: the matching worker, however loaded", routed: map[string][]uint64{"w2": a},
			running: map[string]int{"w1": 0, "w2": 60}, // spread 60: not imbalanced
			req:     job(a[:4], seq(2, 6)), want: "w2", rule: "prefix_match",
		},
		{
			name: "match of exactly 0.3: the fewest running", routed: map[string][]uint64{"w2": a},
			running: map[string]int{"w1": 3, "w2": 2},
			req:     job(a[:3], seq(2, 7)), want: "w2", rule: "running",
		},
		{
			name:   "imbalanced (spread 90 > 64, 100 > 1.5·10): the fewest running, whatever the match",
			routed: map[string][]uint64{"w1": a}, running: map[string]int{"w1": 100, "w2": 10},
			req: job(a), want: "w2", rule: "running",
		},
		{
			name:   "spread over 64 but under 1.5×: balanced, the match decides",
			routed: map[string][]uint64{"w1": a}, running: map[string]int{"w1": 200, "w2": 135},
			req: job(a), want: "w1", rule: "prefix_match",
		},
		{
			name: "1.5× but spread under 64: balanced", routed: map[string][]uint64{"w1": a},
			running: map[string]int{"w1": 60, "w2": 0}, req: job(a), want: "w1", rule: "prefix_match",
		},
		{
			name: "a prompt under one block: the fewest running", routed: map[string][]uint64{"w2": a},
			running: map[string]int{"w1": 1},
			req:     scoring.Job{Model: "m", PromptTokens: 12}, want: "w2", rule: "running",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newPrefixMatchOrShortestQueue()
			for w, blocks := range tc.routed {
				s.Claimed("tree-"+w, scoring.Job{Model: "m", Blocks: blocks}, w, t0)
				s.Released("tree-"+w, t0)
			}
			for w, n := range tc.running {
				for i := range n {
					s.Claimed(fmt.Sprintf("%s-%d", w, i), scoring.Job{Model: "m"}, w, t0)
				}
			}
			got, cands := pick(t, s, tc.req, t0.Add(time.Second), fleet(2))
			if got != tc.want {
				t.Fatalf("picked %s, want %s: %+v", got, tc.want, cands)
			}
			for _, term := range cands[0].Terms {
				if decides := term.Weight != 0; decides != (term.Name == tc.rule) {
					t.Errorf("term %s weight %g; the rule that applies is %s", term.Name, term.Weight, tc.rule)
				}
			}
		})
	}
}

func TestShortestQueueCountsOnlyUnreleased(t *testing.T) {
	s := newPrefixMatchOrShortestQueue()
	for i := range 70 {
		s.Claimed(fmt.Sprint(i), scoring.Job{Model: "m"}, "w1", t0)
	}
	_, cands := pick(t, s, job(seq(1, 4)), t0, fleet(2))
	if v := term(t, cands, "w1", "imbalanced"); v != 1 {
		t.Fatal("70 running against 0 is imbalanced")
	}
	for i := range 10 {
		s.Released(fmt.Sprint(i), t0)
	}
	s.Released("0", t0) // released twice: counted once
	_, cands = pick(t, s, job(seq(1, 4)), t0, fleet(2))
	if v, im := term(t, cands, "w1", "running"), term(t, cands, "w1", "imbalanced"); v != 60 || im != 0 {
		t.Fatalf("running %g imbalanced %g, want 60 and 0", v, im)
	}
}

func TestShortestQueueTreesAreEvictedOnSchedule(t *testing.T) {
	s := newPrefixMatchOrShortestQueue()
	s.maxTreeBlocks = 10
	old, recent := seq(1, 10), seq(2, 10)
	s.Claimed("r1", job(old), "w1", t0) // schedules the eviction at t0+120s
	s.Claimed("r2", job(recent), "w1", t0.Add(10*time.Second))
	ratio := func(at time.Duration, blocks []uint64) float64 {
		_, cands := pick(t, s, job(blocks), t0.Add(at), fleet(1))
		return term(t, cands, "w1", "prefix_match")
	}
	if ratio(119*time.Second, old) != 1 {
		t.Fatal("evicted before the interval")
	}
	if r := ratio(121*time.Second, old); r != 0 {
		t.Fatalf("the least recently used blocks survived the eviction: match %g", r)
	}
	if r := ratio(122*time.Second, recent); r != 1 {
		t.Fatalf("the recent blocks were evicted too: match %g", r)
	}
	if n := len(s.trees["w1"]); n != 10 {
		t.Fatalf("tree holds %d blocks, want the limit 10", n)
	}
}

// Among blocks of one insert, the deepest go first, so a prefix is never
// cut from under its continuation.
func TestShortestQueueEvictsLeavesFirst(t *testing.T) {
	tree := map[uint64]treeEntry{}
	for i, b := range seq(1, 6) {
		tree[b] = treeEntry{used: 5, depth: int32(i)}
	}
	evictDownTo(tree, 4)
	if got := leading(seq(1, 6), func(b uint64) bool { _, ok := tree[b]; return ok }); got != 4 {
		t.Fatalf("kept a leading run of %d, want 4", got)
	}
}
