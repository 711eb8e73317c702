package emulate

import (
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

var _ scoring.Strategy = (*prefixAffinityTokenLoad)(nil)

func TestApproxBlocksAre64Tokens(t *testing.T) {
	b16 := seq(1, 11) // 176 tokens: two full 64-token blocks and a partial one
	if got, want := approxBlocks(b16), []uint64{b16[3], b16[7]}; !slices.Equal(got, want) {
		t.Fatalf("approxBlocks = %x, want %x (every fourth 16-token hash)", got, want)
	}
	// Prompts that share 127 tokens share one 64-token block, not two.
	a := seq(2, 8)
	b := append(slices.Clone(a[:7]), seq(3, 1)...)
	if n := prefixMatch(approxBlocks(a), approxBlocks(b)); n != 1 {
		t.Fatalf("127 shared tokens match %d 64-token blocks, want 1", n)
	}
	if n := len(approxBlocks(seq(4, approxStride*approxMaxBlocks+100))); n != approxMaxBlocks {
		t.Fatalf("%d blocks indexed, want the first %d (131,072 tokens)", n, approxMaxBlocks)
	}
}

func prefixMatch(a, b []uint64) int {
	return leading(a, func(h uint64) bool { return slices.Contains(b, h) })
}

func TestApproxIndexLearnsOnlyItsOwnRouting(t *testing.T) {
	x, y := newApproxIndex(), newApproxIndex() // two router replicas
	blocks := approxBlocks(wide(seq(1, 10)))
	x.add("w1", blocks)
	if got := x.match(blocks)["w1"]; got != 10 {
		t.Fatalf("routing replica matches %d blocks on w1, want 10", got)
	}
	if got := y.match(blocks)["w1"]; got != 0 {
		t.Fatalf("the other replica matches %d blocks: indexes must not be shared", got)
	}
	// autoTune: a server with 40 16-token blocks of KV remembers 10
	// 64-token blocks.
	x.tune("w2", 40)
	x.add("w2", approxBlocks(wide(seq(2, 15))))
	if got := x.match(approxBlocks(wide(seq(2, 15))))["w2"]; got != 0 {
		t.Fatalf("w2 matches %d leading blocks after its 10-block LRU dropped the first 5, want 0", got)
	}
	if !x.servers["w2"].has(seq(2, 15)[14]) || x.servers["w2"].order.Len() != 10 {
		t.Fatalf("w2 holds %d blocks, want the 10 most recent", x.servers["w2"].order.Len())
	}
}

func TestAffinityFilter(t *testing.T) {
	tests := []struct {
		name  string
		score []float64
		ttft  []float64 // seconds
		want  []bool
	}{
		{"no sticky endpoint keeps all", []float64{0.5, 0.79, 0}, []float64{0, 0, 0}, []bool{true, true, true}},
		{"0.80 is sticky, 0.79 is not", []float64{0.80, 0.79, 1}, []float64{0, 0, 0}, []bool{true, false, true}},
		{"within the 18 s penalty it sticks", []float64{0.9, 0}, []float64{17.9, 0}, []bool{true, false}},
		{"past the 18 s penalty it opens", []float64{0.9, 0}, []float64{18.1, 0}, []bool{true, true}},
		{"the best sticky one counts", []float64{0.9, 0.85, 0}, []float64{40, 10, 0}, []bool{true, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := affinityFilter(tc.score, tc.ttft); !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// A group's prompts stay on the worker that first took their system
// prompt while it has room, then spill once its in-flight prefill is 18 s
// of work ahead of the idlest worker ("sticky until saturated").
func TestPrefixAffinityTokenLoadSticksUntilSaturated(t *testing.T) {
	s := newPrefixAffinityTokenLoad()
	ws := fleet(3)
	for i := range ws {
		ws[i].PrefillRate = 1000 // tokens/s: 18 s is 18,000 tokens
	}
	system := seq(1, 40) // 2,560 tokens of 64-token blocks
	question := func(i int) []uint64 { return seq(uint64(100+i), 2) }
	first, _ := pick(t, s, job(wide(system), wide(question(0))), t0, ws)
	s.Claimed("r0", job(wide(system), wide(question(0))), first, t0)
	spilled := -1
	for i := 1; i < 40; i++ {
		j := job(wide(system), wide(question(i)))
		got, cands := pick(t, s, j, t0, ws)
		if got != first {
			spilled = i
			if v := term(t, cands, first, "ttft_estimate_seconds"); v <= 18 {
				t.Fatalf("request %d left %s at an estimated TTFT of %gs, under the 18 s penalty", i, first, v)
			}
			break
		}
		if v := term(t, cands, got, "prefix_score"); v < affinityThreshold {
			t.Fatalf("request %d stuck with prefix score %g", i, v)
		}
		s.Claimed("r"+string(rune('a'+i)), j, got, t0)
	}
	// 2,688 uncached tokens first, then 128 a request: the sticky worker
	// passes 18,000 tokens in flight after 121 more requests; with fewer
	// it must stay sticky, so by 40 no spill is due.
	if spilled >= 0 {
		t.Fatalf("spilled at request %d, before the sticky worker held 18 s of prefill", spilled)
	}
	// Release everything and load the sticky worker directly past 18 s.
	s2 := newPrefixAffinityTokenLoad()
	s2.Claimed("big", job(wide(system), wide(seq(9, 400))), "w1", t0) // 28,160 uncached tokens
	got, _ := pick(t, s2, job(wide(system), wide(question(1))), t0, ws)
	if got == "w1" {
		t.Fatal("the saturated sticky worker was kept")
	}
	s2.Released("big", t0.Add(time.Second))
	if got, _ := pick(t, s2, job(wide(system), wide(question(2))), t0, ws); got != "w1" {
		t.Fatalf("after the release the group went to %s, want back to w1", got)
	}
}

// Within the sticky set the least token load wins; a cold prompt goes to
// the least loaded worker of all.
func TestPrefixAffinityTokenLoadPicksLeastTokens(t *testing.T) {
	s := newPrefixAffinityTokenLoad()
	ws := fleet(3)
	sys := seq(1, 20)
	s.Claimed("a", job(wide(sys), wide(seq(2, 200))), "w1", t0)
	s.Claimed("b", job(wide(sys), wide(seq(3, 2))), "w2", t0)
	got, cands := pick(t, s, job(wide(sys), wide(seq(4, 2))), t0, ws)
	if got != "w2" {
		t.Fatalf("picked %s, want w2 (sticky, fewer tokens than w1)", got)
	}
	if term(t, cands, "w3", "filtered_out") != 1 {
		t.Fatal("w3 holds none of the prompt and should be filtered out")
	}
	if got, _ := pick(t, s, job(wide(seq(5, 10))), t0, ws); got != "w3" {
		t.Fatalf("a cold prompt went to %s, want the idle w3", got)
	}
}

var _ observer = (*prefixAffinityTokenLoad)(nil)

func TestPrefixAffinityTokenLoadRegistered(t *testing.T) {
	if s := newEmulation(t, PrefixAffinityTokenLoad); s.Name() != PrefixAffinityTokenLoad {
		t.Fatalf("built %s", s.Name())
	}
	if !slices.Contains(PrefixNames(), PrefixAffinityTokenLoad) {
		t.Fatal("not listed among the prefix emulations")
	}
}
