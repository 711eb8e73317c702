package scoring

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestScoredLiveFromWeights(t *testing.T) {
	w := worker("a", func(w *Worker) { w.KVBlocks, w.PrefillRate = 1000, 5000 })
	per := 1 / 16000.0
	for _, tc := range []struct {
		name              string
		prefix, tokenLoad float64
		slo               time.Duration
		want              LiveWeights
		terms             []string
	}{
		{"off by default", 0, 0, 2 * time.Second, LiveWeights{}, nil},
		{"prefix with guard", 3, 0, 2 * time.Second, LiveWeights{Miss: 3, PrefillLimit: 10000, KVBlocks: 1000}, []string{"prefix_miss"}},
		{"prefix without slo", 3, 0, 0, LiveWeights{Miss: 3, KVBlocks: 1000}, []string{"prefix_miss"}},
		{"token load", 0, 2, 2 * time.Second, LiveWeights{Prefill: 2 * per, Decode: 2 * per, Uncached: 2 * per, KVBlocks: 1000}, []string{"token_load"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			p.Weights.Prefix, p.Weights.TokenLoad, p.TTFTSLO = tc.prefix, tc.tokenLoad, tc.slo
			s, _ := New(Scored, p)
			plan := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{w}})
			c := plan.Candidates[0]
			if c.LiveWeights != tc.want {
				t.Fatalf("live weights %+v, want %+v", c.LiveWeights, tc.want)
			}
			var names []string
			for _, lt := range c.LiveTerms {
				names = append(names, lt.Name)
			}
			if !slices.Equal(names, tc.terms) {
				t.Fatalf("live terms %v, want %v", names, tc.terms)
			}
			if plan.UsesLive() != tc.want.On() {
				t.Fatalf("UsesLive %v", plan.UsesLive())
			}
		})
	}
}

// prefixAndLoad is a candidate with today's two live terms: prefix weight
// 10, token_load weight 4 over 1000 tokens, prefill guard at 500.
func prefixAndLoad() Candidate {
	c := Candidate{LiveWeights: LiveWeights{PrefillLimit: 500}}
	c.AddLive(LiveTerm{Name: "prefix_miss", Weight: 10, Miss: 1})
	c.AddLive(LiveTerm{Name: "token_load", Weight: 4, Prefill: 1e-3, Decode: 1e-3, Uncached: 1e-3})
	return c
}

func TestLiveScore(t *testing.T) {
	c := prefixAndLoad()
	p := Job{PromptTokens: 200, MaxTokens: 50, Blocks: make([]uint64, 10)}.Prompt()
	for _, tc := range []struct {
		name string
		live Live
		want float64
	}{
		// 8 of 10 blocks matched: 128 tokens cached, 72 uncached.
		{"warm", Live{Match: 8, Prefill: 100, Decode: 30}, 10*0.2 + 4*(100+30+72)/1000.0},
		{"cold", Live{Prefill: 0, Decode: 0}, 10 + 4*200/1000.0},
		// 450 + 72 > 500: the match yields, all 200 tokens count.
		{"saturated", Live{Match: 8, Prefill: 450, Ahead: 450}, 10 + 4*(450+200)/1000.0},
		// The same prefill past its first token: the match counts.
		{"decoding", Live{Match: 8, Prefill: 450}, 10*0.2 + 4*(450+72)/1000.0},
		// Not looked up: the terms of no match, an upper bound.
		{"unread", Live{Prefill: 100, Decode: 30, Unread: true}, 10 + 4*(100+30+200)/1000.0},
	} {
		if got := LiveScore(c.LiveWeights, p, tc.live); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		sum := 0.0
		for _, term := range appendLiveTerms(nil, c, p, tc.live) {
			sum += term.Contribution()
		}
		if math.Abs(sum-tc.want) > 1e-9 {
			t.Errorf("%s: the breakdown's terms sum to %v, want %v", tc.name, sum, tc.want)
		}
	}
	names := func(l Live) (out []string) {
		for _, t := range appendLiveTerms(nil, c, p, l) {
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
	if got := names(Live{Match: 8, Prefill: 450, Ahead: 450}); !slices.Contains(got, "prefill_guard") {
		t.Errorf("saturated candidate's terms %v: want prefill_guard", got)
	}
	if got := LiveScore(c.LiveWeights, Prompt{PromptTokens: 8}, Live{}); math.Abs(got-4*8/1000.0) > 1e-12 {
		t.Errorf("no blocks: only token load, got %v", got)
	}
}

// TestLiveBounds: every match up to the full one scores within the
// bounds, for random non-negative coefficients, guards and trusts.
func TestLiveBounds(t *testing.T) {
	for i := range 2000 {
		f := func(k int) float64 { return float64((i*7919+k*104729)%1000) / 100 }
		w := LiveWeights{Miss: f(1), Prefill: f(2) / 100, Decode: f(3) / 100, Uncached: f(4) / 100, PrefillLimit: 100 * f(5), Trust: f(6) / 10, Stall: f(7) / 100}
		p := Prompt{Blocks: make([]uint64, i%40), PromptTokens: i % 900}
		full := 4 * (len(p.Blocks) / 4)
		pre, dec := i%700, i%300
		ahead := pre * (i % 3) / 2
		lo, hi := LiveBounds(w, p, full, Live{Prefill: pre, Decode: dec, Ahead: ahead})
		for m := 0; m <= full; m++ {
			s := LiveScore(w, p, Live{Match: m, Prefill: pre, Decode: dec, Ahead: ahead})
			if s < lo-1e-9 || s > hi+1e-9 {
				t.Fatalf("%+v %+v match %d: %v outside [%v, %v]", w, p, m, s, lo, hi)
			}
		}
	}
	if lo, hi := LiveBounds(LiveWeights{Prefill: -1}, Prompt{}, 0, Live{}); !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Fatalf("a negative coefficient bounds nothing: [%v, %v]", lo, hi)
	}
}

// The Stall part counts in the score and not against the ceiling: 100
// uncached tokens at Uncached 0.1 and Stall 1 score 110, of which the
// ceiling bounds 10; a full match leaves neither. OverBounds is Over at a
// full match and at none, and with a negative coefficient bounds nothing.
func TestStallOutsideTheCeiling(t *testing.T) {
	p := Prompt{Blocks: make([]uint64, 8), PromptTokens: 128}
	l := Live{Match: 2} // 32 tokens cached: 96 uncached
	for _, tc := range []struct {
		ceiling  float64
		over     bool
		fullOver bool
		noneOver bool
	}{
		{ceiling: 0, over: false, fullOver: false, noneOver: false},
		{ceiling: 12.8, over: false, fullOver: false, noneOver: false},
		{ceiling: 10, over: false, fullOver: false, noneOver: true},
		{ceiling: 9, over: true, fullOver: false, noneOver: true},
	} {
		w := LiveWeights{Uncached: 0.1, Stall: 1, Ceiling: tc.ceiling}
		if got := LiveScore(w, p, l); math.Abs(got-9.6-96) > 1e-9 {
			t.Fatalf("score %v, want 9.6 + 96", got)
		}
		if got := w.Over(p, l); got != tc.over {
			t.Errorf("ceiling %v: over %v, want %v", tc.ceiling, got, tc.over)
		}
		if fo, no := w.OverBounds(p, 8, l); fo != tc.fullOver || no != tc.noneOver {
			t.Errorf("ceiling %v: bounds over %v/%v, want %v/%v", tc.ceiling, fo, no, tc.fullOver, tc.noneOver)
		}
	}
	if fo, no := (LiveWeights{Stall: -1, Ceiling: 5}).OverBounds(p, 8, l); fo || !no {
		t.Errorf("negative stall: bounds over %v/%v, want false/true", fo, no)
	}
}

func TestPickLiveAndBreakdownAgree(t *testing.T) {
	warm := Candidate{Worker: "busy-warm", Cap: 8, Curve: Curve{Slope: 10}}
	warm.AddLive(LiveTerm{Name: "prefix_miss", Weight: 100, Miss: 1})
	cold := warm
	cold.Worker = "idle-cold"
	cands := []Candidate{warm, cold}
	p := Prompt{PromptTokens: 64, Blocks: []uint64{1, 2, 3, 4}}
	active := []int{3, 0}
	live := []Live{{Match: 4}, {}}
	if i := PickLive(cands, p, active, live, nil); i != 0 {
		t.Fatalf("picked %d; the full match outweighs 3 in flight", i)
	}
	if i := PickLive(cands, p, active, nil, nil); i != 1 {
		t.Fatalf("without live figures picked %d", i)
	}
	for i, l := range BreakdownLive(cands, p, active, live) {
		want := cands[i].Curve.At(active[i]) + LiveScore(cands[i].LiveWeights, p, live[i])
		if math.Abs(l.Total-want) > 1e-9 {
			t.Fatalf("%s: total %v, want %v", l.Worker, l.Total, want)
		}
		if len(cands[i].Terms) != 0 {
			t.Fatal("the plan's terms were modified")
		}
	}
}

// TestLiveScoreAhead: the latency model's time to first token as a live
// form, a0 + a1·(q + u) + a2·d + a3·(q + u)·d, each part by hand.
func TestLiveScoreAhead(t *testing.T) {
	const a1, a2, a3 = 2e-4, 1e-5, 3e-9
	c := Candidate{}
	c.AddLive(LiveTerm{Name: "predicted_ttft", Weight: 1, Ahead: a1, Uncached: a1, Decode: a2, AheadDecode: a3})
	p := Job{PromptTokens: 1000, Blocks: make([]uint64, 62)}.Prompt()
	for _, tc := range []struct {
		name string
		live Live
		u    float64
	}{
		{"cold", Live{Ahead: 3000, Decode: 20000}, 1000},
		{"warm", Live{Match: 60, Ahead: 3000, Decode: 20000}, 1000 - 16*60},
		{"idle", Live{}, 1000},
	} {
		q, d := float64(tc.live.Ahead), float64(tc.live.Decode)
		want := a1*(q+tc.u) + a2*d + a3*(q+tc.u)*d
		if got := LiveScore(c.LiveWeights, p, tc.live); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, want)
		}
		sum := 0.0
		for _, term := range appendLiveTerms(nil, c, p, tc.live) {
			sum += term.Contribution()
		}
		if math.Abs(sum-want) > 1e-12 {
			t.Errorf("%s: terms sum to %v, want %v", tc.name, sum, want)
		}
		lo, hi := LiveBounds(c.LiveWeights, p, 60, tc.live)
		if s := LiveScore(c.LiveWeights, p, tc.live); s < lo-1e-12 || s > hi+1e-12 {
			t.Errorf("%s: %v outside bounds [%v, %v]", tc.name, s, lo, hi)
		}
	}
}

// TestPickCeiling: a candidate whose live score passes its ceiling is
// skipped as if full, whatever its curve, and none left is -1.
func TestPickCeiling(t *testing.T) {
	cands := []Candidate{
		{Worker: "a", Cap: 10, Curve: Curve{Base: 1}, LiveWeights: LiveWeights{Ahead: 1e-3, Ceiling: 1}},
		{Worker: "b", Cap: 10, Curve: Curve{Base: 5}, LiveWeights: LiveWeights{Ahead: 1e-3, Ceiling: 1}},
	}
	active := []int{0, 0}
	// a's live score 1.5 passes 1; b's 0.1 does not, though its total is higher.
	if got := PickLive(cands, Prompt{}, active, []Live{{Ahead: 1500}, {Ahead: 100}}, nil); got != 1 {
		t.Errorf("PickLive = %d, want 1 (a is past its ceiling)", got)
	}
	if got := PickLive(cands, Prompt{}, active, []Live{{Ahead: 1500}, {Ahead: 1100}}, nil); got != -1 {
		t.Errorf("PickLive = %d, want -1 (both past)", got)
	}
	if got := PickLive(cands, Prompt{}, active, []Live{{Ahead: 900}, {Ahead: 100}}, nil); got != 0 {
		t.Errorf("PickLive = %d, want 0 (both under: the lower total)", got)
	}
	// The breakdown says which was skipped for its ceiling, and the ceiling.
	lines := BreakdownLive(cands, Prompt{}, active, []Live{{Ahead: 1500}, {Ahead: 100}})
	if !lines[0].Over || lines[1].Over || lines[0].Ceiling != 1 {
		t.Errorf("breakdown over %v/%v ceiling %v, want true/false 1", lines[0].Over, lines[1].Over, lines[0].Ceiling)
	}
}
