package emulate

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fleet is n idle, healthy workers w1..wn serving model m, uncapped.
func fleet(n int) []scoring.Worker {
	ws := make([]scoring.Worker, n)
	for i := range ws {
		ws[i] = scoring.Worker{
			ID: "w" + string(rune('1'+i)), Models: []string{"m"}, Health: scoring.Healthy, MaxConcurrency: 1 << 20,
			Queue: scoring.Known(0), KVPressure: scoring.Known(0),
		}
	}
	return ws
}

// seq is n synthetic block hashes of a prompt identified by id; join them
// for prompts that share a prefix.
func seq(id uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = id<<32 | uint64(i)
	}
	return out
}

func job(blocks ...[]uint64) scoring.Job {
	b := slices.Concat(blocks...)
	return scoring.Job{Model: "m", Blocks: b, PromptTokens: len(b) * blockTokens}
}

type observer interface {
	scoring.Strategy
	Claimed(id string, job scoring.Job, worker string, now time.Time)
	Released(id string, now time.Time)
}

// pick plans and returns the worker the store would claim (all idle,
// uncapped) and the plan.
func pick(t *testing.T, s scoring.Strategy, j scoring.Job, now time.Time, ws []scoring.Worker) (string, []scoring.Candidate) {
	t.Helper()
	plan := scoring.Build(s, scoring.Input{Job: j, Workers: ws, Now: now})
	i := scoring.Pick(plan.Candidates, make([]int, len(plan.Candidates)), nil)
	if i < 0 {
		t.Fatal("no pick")
	}
	for _, c := range plan.Candidates {
		sum := 0.0
		for _, term := range c.Terms {
			sum += term.Contribution()
		}
		// Costs add up to Base, scores to maximise to −Base.
		if min(math.Abs(sum-c.Curve.Base), math.Abs(sum+c.Curve.Base)) > 1e-9 || c.Curve.Slope != 0 || c.Curve.Mult != 0 {
			t.Fatalf("%s: terms add to %g, base %g (curve %+v): the log would not show the choice", c.Worker, sum, c.Curve.Base, c.Curve)
		}
	}
	return plan.Candidates[i].Worker, plan.Candidates
}

func term(t *testing.T, cs []scoring.Candidate, worker, name string) float64 {
	t.Helper()
	for _, c := range cs {
		if c.Worker != worker {
			continue
		}
		for _, term := range c.Terms {
			if term.Name == name {
				return term.Value
			}
		}
	}
	t.Fatalf("no term %s for %s", name, worker)
	return 0
}

// newEmulation builds the named emulation through scoring's registry, as
// the scheduler does.
func newEmulation(t *testing.T, name string) scoring.Strategy {
	t.Helper()
	s, err := scoring.New(name, scoring.Params{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRegistry(t *testing.T) {
	names := scoring.Names()
	if got := names[len(names)-len(Names()):]; !slices.Equal(got, Names()) {
		t.Fatalf("registered strategies %v: want the emulations %v registered, after scoring's own", names, Names())
	}
	if s := newEmulation(t, QueueKVMaxScore); s.Name() != QueueKVMaxScore {
		t.Fatalf("%s built %s", QueueKVMaxScore, s.Name())
	} else if _, ok := s.(observer); ok {
		t.Errorf("%s keeps no state and should not observe claims", QueueKVMaxScore)
	}
	for _, name := range PrefixNames() {
		s := newEmulation(t, name)
		if s.Name() != name {
			t.Fatalf("%s built %s", name, s.Name())
		}
		if _, ok := s.(observer); !ok {
			t.Errorf("%s keeps per-replica state but does not observe claims", name)
		}
		if other := newEmulation(t, name); other == s {
			t.Errorf("%s: instances must not share state", name)
		}
	}
}

// Every emulation sends a request back to the worker its prefix was routed
// to when the loads are equal, and spreads unrelated prompts as its rule
// says.
func TestPrefixAffinityWinsAtEqualLoad(t *testing.T) {
	for _, name := range PrefixNames() {
		t.Run(name, func(t *testing.T) {
			s := newEmulation(t, name)
			o := s.(observer)
			ws := fleet(4)
			conv := seq(1, 40)
			first, _ := pick(t, s, job(conv), t0, ws)
			o.Claimed("r1", job(conv), first, t0)
			o.Released("r1", t0.Add(time.Second))
			// The next turn: the whole conversation so far, then more.
			next := job(conv, seq(2, 10))
			for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}} {
				shuffled := []scoring.Worker{ws[order[0]], ws[order[1]], ws[order[2]], ws[order[3]]}
				if got, _ := pick(t, s, next, t0.Add(2*time.Second), shuffled); got != first {
					t.Fatalf("next turn went to %s, its prefix is on %s", got, first)
				}
			}
		})
	}
}

// wide expands 64-token block hashes into the 16-token ones a job
// carries: four per block, the last of the four being the 64-token
// block's own hash (approxBlocks takes it back), the others unique to it.
func wide(blocks64 []uint64) []uint64 {
	out := make([]uint64, 0, len(blocks64)*approxStride)
	for _, b := range blocks64 {
		for k := range approxStride - 1 {
			out = append(out, b^uint64(k+1)<<60)
		}
		out = append(out, b)
	}
	return out
}
