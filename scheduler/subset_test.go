package scheduler

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// The endpoint-picker protocol's subset hint: only workers at the listed
// addresses are eligible; a list naming none of them leaves nothing.
func TestSubsetRestrictsThePick(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 4), spec("b", "m", 4), spec("c", "m", 4))
	for i := range 6 {
		tk, err := s.Admit(ctx, Request{ID: "in", Model: "m", Subset: []string{"c:80", "unknown:1"}})
		if err != nil {
			t.Fatal(err)
		}
		if tk.Worker() != "c" {
			t.Fatalf("request %d went to %s outside the subset", i, tk.Worker())
		}
		if fb := tk.Fallbacks(2); len(fb) != 0 {
			t.Fatalf("fallbacks %v outside the subset", fb)
		}
		tk.Finish(Outcome{Status: 200})
	}
	for _, subset := range [][]string{{}, {"nowhere:1"}} {
		if _, err := s.Admit(ctx, Request{ID: "out", Model: "m", Subset: subset}); !errors.Is(err, ErrNoHealthyWorker) {
			t.Fatalf("subset %v: got %v, want ErrNoHealthyWorker", subset, err)
		}
	}
	if addr, ok := s.AddressOf("b"); !ok || addr != "b:80" {
		t.Fatalf("AddressOf(b) = %q, %v", addr, ok)
	}
	if _, ok := s.AddressOf("zz"); ok {
		t.Fatal("AddressOf an unknown worker")
	}
}

// Fallbacks come from the decision's own totals, best first, without the
// claimed worker and without workers at their cap.
func TestFallbacksFollowTheScores(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 1), spec("b", "m", 3), spec("c", "m", 3))
	// Load the fleet unevenly: a full (1/1), b with two, c with one.
	var held []*Ticket
	for _, sub := range [][]string{{"a:80"}, {"b:80"}, {"b:80"}, {"c:80"}} {
		tk, err := s.Admit(ctx, Request{ID: "load", Model: "m", Subset: sub})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, tk)
	}
	tk, err := s.Admit(ctx, Request{ID: "probe", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Worker() != "c" {
		t.Fatalf("picked %s, want c (one in flight against b's two)", tk.Worker())
	}
	if fb := tk.Fallbacks(5); !slices.Equal(fb, []string{"b"}) {
		t.Fatalf("fallbacks %v, want [b] (a is at its cap)", fb)
	}
	if fb := tk.Fallbacks(0); fb != nil {
		t.Fatalf("Fallbacks(0) = %v", fb)
	}
	for _, h := range append(held, tk) {
		h.Finish(Outcome{Status: 200})
	}
}

// A worker with no configured cap (0) is never full: it stays a fallback
// however much it holds.
func TestFallbacksWithoutCaps(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 0), spec("b", "m", 0))
	var held []*Ticket
	for range 3 {
		tk, err := s.Admit(ctx, Request{ID: "load", Model: "m", Subset: []string{"a:80"}})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, tk)
	}
	tk, err := s.Admit(ctx, Request{ID: "probe", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Worker() != "b" {
		t.Fatalf("picked %s, want b (a holds three)", tk.Worker())
	}
	if fb := tk.Fallbacks(5); !slices.Equal(fb, []string{"a"}) {
		t.Fatalf("fallbacks %v, want [a] (no cap: never full)", fb)
	}
	for _, h := range append(held, tk) {
		h.Finish(Outcome{Status: 200})
	}
}
