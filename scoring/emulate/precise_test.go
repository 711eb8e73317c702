package emulate

import (
	"testing"
	"time"
)

func TestPrecisePrefixFollowsEvents(t *testing.T) {
	p := NewPrecisePrefix()
	a := seq(1, 10)
	ws := fleet(2)
	p.Stored("w2", a[:6])
	got, cands := pick(t, p, job(a), t0, ws)
	if got != "w2" || term(t, cands, "w2", "prefix_score") != 0.6 {
		t.Fatalf("picked %s with %+v, want w2 scoring 6/10", got, cands)
	}
	// An evicted block ends the match there, whatever follows it.
	p.Removed("w2", a[2:3])
	if _, cands := pick(t, p, job(a), t0, ws); term(t, cands, "w2", "prefix_score") != 0.2 {
		t.Fatalf("after the eviction w2 scores %g, want 0.2", term(t, cands, "w2", "prefix_score"))
	}
	if p.Holds("w1", a[0]) || !p.Holds("w2", a[0]) || p.Holds("w2", a[2]) {
		t.Fatal("Holds disagrees with the events")
	}
}

func TestPrecisePrefixSpeculativeEntriesExpire(t *testing.T) {
	p := NewPrecisePrefix()
	a := seq(1, 10)
	ws := fleet(2)
	p.Claimed("r1", job(a), "w1", t0)
	if _, cands := pick(t, p, job(a), t0.Add(time.Second), ws); term(t, cands, "w1", "prefix_score") != 1 {
		t.Fatal("a pick 1 s ago should count as cached (speculative indexing)")
	}
	if _, cands := pick(t, p, job(a), t0.Add(preciseSpeculativeTTL), ws); term(t, cands, "w1", "prefix_score") != 0 {
		t.Fatal("a speculative entry outlived its 2 s")
	}
	other := NewPrecisePrefix() // another replica saw no pick
	if _, cands := pick(t, other, job(a), t0.Add(time.Second), ws); term(t, cands, "w1", "prefix_score") != 0 {
		t.Fatal("speculative entries must be per replica")
	}
}
