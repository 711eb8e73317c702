package emulate

import (
	"strconv"
	"testing"
)

func TestLeastRequestP2CInstances(t *testing.T) {
	s := NewLeastRequestP2C()
	if s.Name() != LeastRequestP2C {
		t.Fatalf("%s built %s", LeastRequestP2C, s.Name())
	}
	if _, ok := s.(observer); !ok {
		t.Fatalf("%s keeps per-instance counts but does not observe claims", LeastRequestP2C)
	}
	if other := NewLeastRequestP2C(); other == s {
		t.Fatal("instances must not share state")
	}
}

// Of two workers, one busy: the busy one is taken only when both draws
// fall on it, a quarter of the time with replacement (never without).
func TestLeastRequestP2CDrawsWithReplacement(t *testing.T) {
	s := NewLeastRequestP2C()
	o := s.(observer)
	ws := fleet(2)
	o.Claimed("busy", job(), ws[0].ID, t0)
	busy, n := 0, 4000
	for i := range n {
		order := ws
		if i%2 == 1 {
			order = fleet(2)
			order[0], order[1] = ws[1], ws[0]
		}
		if got, _ := pick(t, s, job(), t0, order); got == ws[0].ID {
			busy++
		}
	}
	if share := float64(busy) / float64(n); share < 0.22 || share > 0.28 {
		t.Fatalf("busy worker taken %.3f of the time, want 0.25 (two draws with replacement)", share)
	}
}

// Counts are the instance's own, follow claims and releases, and every
// draw is spread over the fleet.
func TestLeastRequestP2CCounts(t *testing.T) {
	s := NewLeastRequestP2C()
	o := s.(observer)
	ws := fleet(4)
	got := map[string]int{}
	for i := range 400 {
		w, _ := pick(t, s, job(), t0, ws)
		o.Claimed(strconv.Itoa(i), job(), w, t0)
		got[w]++
	}
	// Two choices keep 400 requests on 4 workers close to 100 each.
	for _, w := range ws {
		if got[w.ID] < 95 || got[w.ID] > 105 {
			t.Fatalf("claims per worker %v: want about 100 each", got)
		}
	}
	for i := range 400 {
		o.Released(strconv.Itoa(i), t0)
	}
	o.Released("unknown", t0)
	s2 := s.(*leastRequestP2C)
	if len(s2.active) != 0 || len(s2.inflight) != 0 {
		t.Fatalf("after every release: active %v, in flight %d", s2.active, len(s2.inflight))
	}
}
