package gpusim

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// driveStepper replays reqs (sorted by arrival) on one Stepper the way an
// event queue does: at each instant, every arrival first, then the end of
// the step in flight, then the next plan. each, when set, is called with
// the Stepper once built and after every step.
func driveStepper(t *testing.T, cfg Config, reqs []SimRequest, each func(*Stepper)) []SimResult {
	t.Helper()
	st, err := NewStepper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if each != nil {
		each(st)
	}
	out := make([]SimResult, len(reqs))
	next, stepEnd := 0, time.Duration(-1)
	for done := 0; done < len(reqs); {
		now := stepEnd
		if next < len(reqs) && (stepEnd < 0 || reqs[next].Arrival <= stepEnd) {
			now = reqs[next].Arrival
		}
		if now < 0 {
			t.Fatalf("stalled with %d of %d done", done, len(reqs))
		}
		for next < len(reqs) && reqs[next].Arrival == now {
			out[next].Arrival = now
			switch err := st.Submit(next, reqs[next], now); {
			case errors.Is(err, ErrContextTooLong):
				out[next].Rejected = true
				done++
			case err != nil:
				t.Fatal(err)
			}
			next++
		}
		if stepEnd == now {
			for _, p := range st.Advance(now) {
				if p.First {
					out[p.Tag].FirstToken, out[p.Tag].CachedTokens = p.At, p.CachedTokens
				}
				if p.Done {
					out[p.Tag].Done, out[p.Tag].Tokens, out[p.Tag].Gaps = p.At, p.Tokens, slices.Clone(p.Gaps)
					done++
				}
			}
			stepEnd = -1
			if each != nil {
				each(st)
			}
		}
		if at, ok := st.Plan(now); ok {
			stepEnd = at
		}
	}
	return out
}

// A Stepper driven by an event loop is the engine Simulate runs: on a
// Mooncake replay with prefix sharing, batching and preemption, every
// request's first token, last token, cached prompt and token gaps agree
// exactly.
func TestStepperMatchesSimulate(t *testing.T) {
	rows, err := LoadMooncake(filepath.Join("..", "traces", "mooncake-conversation.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]SimRequest, 0, 300)
	for _, r := range rows[:300] {
		reqs = append(reqs, r.SimRequest())
	}
	reqs = Rescale(reqs, 3)
	slices.SortStableFunc(reqs, func(a, b SimRequest) int { return int(a.Arrival - b.Arrival) })
	cfg := simConfig(func(c *Config) { c.Profile, c.GPUMemUtil, c.StreamSummary = "a100-llama3-8b", 0.4, true })
	want, st, err := Simulate(cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if st.PrefixCacheHits == 0 || st.Preemptions == 0 {
		t.Fatalf("the replay should exercise the prefix cache and preemption: %+v", st)
	}
	got := driveStepper(t, cfg, reqs, nil)
	if len(got[0].Gaps) != got[0].Tokens-1 {
		t.Fatalf("request 0: %d gaps for %d tokens", len(got[0].Gaps), got[0].Tokens)
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Arrival != g.Arrival || w.FirstToken != g.FirstToken || w.Done != g.Done || w.Tokens != g.Tokens || w.CachedTokens != g.CachedTokens || w.Rejected != g.Rejected ||
			!slices.Equal(w.Gaps, g.Gaps) {
			t.Fatalf("request %d: Simulate %+v, Stepper %+v", i, w, g)
		}
	}
}

func TestStepperRefusesSimpleMode(t *testing.T) {
	if _, err := NewStepper(simConfig(nil)); err == nil {
		t.Fatal("a simple-mode config was accepted")
	}
}
