package scoring

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestScoredAffinityFromWeights(t *testing.T) {
	w := worker("a", func(w *Worker) { w.KVBlocks, w.PrefillRate = 1000, 5000 })
	for _, tc := range []struct {
		name              string
		prefix, tokenLoad float64
		slo               time.Duration
		want              Affinity
	}{
		{"off by default", 0, 0, 2 * time.Second, Affinity{}},
		{"prefix with guard", 3, 0, 2 * time.Second, Affinity{Prefix: 3, PrefillLimit: 10000, KVBlocks: 1000}},
		{"prefix without slo", 3, 0, 0, Affinity{Prefix: 3, KVBlocks: 1000}},
		{"token load", 0, 2, 2 * time.Second, Affinity{TokenWeight: 2, CapacityTokens: 16000, KVBlocks: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			p.Weights.Prefix, p.Weights.TokenLoad, p.TTFTSLO = tc.prefix, tc.tokenLoad, tc.slo
			s, _ := New(Scored, p)
			plan := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{w}})
			if got := plan.Candidates[0].Affinity; got != tc.want {
				t.Fatalf("affinity %+v, want %+v", got, tc.want)
			}
			if plan.UsesAffinity() != tc.want.On() {
				t.Fatalf("UsesAffinity %v", plan.UsesAffinity())
			}
		})
	}
}

func TestAffinityTerms(t *testing.T) {
	a := Affinity{Prefix: 10, TokenWeight: 4, CapacityTokens: 1000, PrefillLimit: 500}
	job := Job{PromptTokens: 200, MaxTokens: 50, Blocks: make([]uint64, 10)}
	for _, tc := range []struct {
		name string
		live Live
		want float64
	}{
		// 8 of 10 blocks matched: 128 tokens cached, 72 uncached.
		{"warm", Live{Match: 8, Prefill: 100, Decode: 30}, 10*0.2 + 4*(100+30+72)/1000.0},
		{"cold", Live{Prefill: 0, Decode: 0}, 10 + 4*200/1000.0},
		// 450 + 72 > 500: the match yields, all 200 tokens count.
		{"saturated", Live{Match: 8, Prefill: 450}, 10 + 4*(450+200)/1000.0},
		// Not looked up: the terms of no match, an upper bound.
		{"unread", Live{Prefill: 100, Decode: 30, Unread: true}, 10 + 4*(100+30+200)/1000.0},
	} {
		if got := AffinityScore(Candidate{Affinity: a}, job, tc.live); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	names := func(l Live) (out []string) {
		for _, t := range affinityTerms(a, job, l) {
			out = append(out, t.Name)
		}
		return out
	}
	if got := names(Live{Unread: true}); !slices.Contains(got, "prefix_unread") || slices.Contains(got, "prefix_match") {
		t.Errorf("unread candidate's terms %v: want prefix_unread in place of prefix_match", got)
	}
	if got := names(Live{Match: 2}); slices.Contains(got, "prefix_unread") || !slices.Contains(got, "prefix_match") {
		t.Errorf("looked-up candidate's terms %v", got)
	}
	if got := AffinityScore(Candidate{Affinity: a}, Job{PromptTokens: 8}, Live{}); math.Abs(got-4*8/1000.0) > 1e-12 {
		t.Errorf("no blocks: only token load, got %v", got)
	}
}

func TestPickLiveAndBreakdownAgree(t *testing.T) {
	cands := []Candidate{
		{Worker: "busy-warm", Cap: 8, Curve: Curve{Slope: 10}, Affinity: Affinity{Prefix: 100}},
		{Worker: "idle-cold", Cap: 8, Curve: Curve{Slope: 10}, Affinity: Affinity{Prefix: 100}},
	}
	job := Job{PromptTokens: 64, Blocks: []uint64{1, 2, 3, 4}}
	active := []int{3, 0}
	live := []Live{{Match: 4}, {}}
	if i := PickLive(cands, job, active, live, nil); i != 0 {
		t.Fatalf("picked %d; the full match outweighs 3 in flight", i)
	}
	if i := PickLive(cands, job, active, nil, nil); i != 1 {
		t.Fatalf("without live figures picked %d", i)
	}
	for i, l := range BreakdownLive(cands, job, active, live) {
		want := cands[i].Curve.At(active[i]) + AffinityScore(cands[i], job, live[i])
		if math.Abs(l.Total-want) > 1e-9 {
			t.Fatalf("%s: total %v, want %v", l.Worker, l.Total, want)
		}
		if len(cands[i].Terms) != 0 {
			t.Fatal("the plan's terms were modified")
		}
	}
}
