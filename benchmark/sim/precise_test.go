package sim

import (
	"slices"
	"testing"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// Two GPUs, one request each, two replicas subscribed to both: after the
// prefills, each replica's index holds exactly the cacheable blocks each
// engine computed, on that engine and no other: A's prompt of 49 tokens
// caches its 3 blocks (the last token is recomputed anyway), B's of 40
// tokens caches 2 of its 2.
func TestKVFeedMatchesTheEngines(t *testing.T) {
	cfgs, _, err := fleetSpecs([]GPUClass{{Profile: "a100-llama3-8b", Count: 2}}, DefaultStudy().Engine, Disagg{})
	if err != nil {
		t.Fatal(err)
	}
	f := &kvFeed{}
	for _, c := range cfgs {
		st, err := gpusim.NewStepper(c)
		if err != nil {
			t.Fatal(err)
		}
		if !st.EnableKVEvents() {
			t.Fatal("no KV events from a caching engine")
		}
		f.gpus = append(f.gpus, &fleetGPU{id: c.ID, st: st})
	}
	f.replicas = []*emulate.PrecisePrefix{emulate.NewPrecisePrefix(), emulate.NewPrecisePrefix()}
	a, b := []uint64{0xa0, 0xa1, 0xa2}, []uint64{0xb0, 0xb1}
	for i, r := range []gpusim.SimRequest{{PromptTokens: 49, OutputTokens: 1, Blocks: a}, {PromptTokens: 40, OutputTokens: 1, Blocks: b}} {
		st := f.gpus[i].st
		if err := st.Submit(i, r, 0); err != nil {
			t.Fatal(err)
		}
		at, ok := st.Plan(0)
		if !ok {
			t.Fatal("nothing planned")
		}
		st.Advance(at)
	}
	f.sync()
	for n, p := range f.replicas {
		for g, want := range [][]uint64{a, b} {
			other := [][]uint64{b, a}[g]
			for _, h := range want {
				if !p.Holds(f.gpus[g].id, h) {
					t.Errorf("replica %d: %s's block %x missing", n, f.gpus[g].id, h)
				}
			}
			for _, h := range other {
				if p.Holds(f.gpus[g].id, h) {
					t.Errorf("replica %d: %s holds %x, computed elsewhere", n, f.gpus[g].id, h)
				}
			}
		}
	}
}

// The simulator registers the precise emulation; a run with it hits the
// prefix cache like the index it reads, deterministically for a seed.
func TestPreciseRuns(t *testing.T) {
	if !slices.Contains(scoring.Names(), emulate.PrecisePrefixQueueKVMaxScore) {
		t.Fatalf("%s not registered", emulate.PrecisePrefixQueueKVMaxScore)
	}
	s := smallStudy()
	a := runOnce(t, s, emulate.PrecisePrefixQueueKVMaxScore, 2, 3)
	b := runOnce(t, s, emulate.PrecisePrefixQueueKVMaxScore, 2, 3)
	if a.PrefixHits != b.PrefixHits || a.End != b.End {
		t.Fatalf("two runs of seed 3 differ: %d/%v and %d/%v hits/end", a.PrefixHits, a.End, b.PrefixHits, b.End)
	}
	rr := runOnce(t, s, "round_robin", 2, 3)
	if a.PrefixHits <= rr.PrefixHits {
		t.Fatalf("precise prefix hit %d tokens, round robin %d", a.PrefixHits, rr.PrefixHits)
	}
	// Outside a run the factory's instance has no feed.
	p, err := scoring.New(emulate.PrecisePrefixQueueKVMaxScore, scoring.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if p.(*preciseReplica).feed != nil {
		t.Fatal("an instance built outside a run is fed")
	}
}
