package decisions

import (
	"fmt"
	"sync"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
)

func dec(id string, n int) *scheduler.Decision {
	return &scheduler.Decision{RequestID: id, MaxTokens: n}
}

// TestRing: what the ring holds after a sequence of records, by request id.
func TestRing(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		records []*scheduler.Decision
		// want maps each request id asked for to the MaxTokens of the
		// decision Get returns (-1: none kept).
		want    map[string]int
		wantLen int
	}{
		{"empty", 3, nil, map[string]int{"a": -1}, 0},
		{"below capacity", 3, []*scheduler.Decision{dec("a", 1), dec("b", 2)}, map[string]int{"a": 1, "b": 2, "c": -1}, 2},
		{"at capacity", 3, []*scheduler.Decision{dec("a", 1), dec("b", 2), dec("c", 3)}, map[string]int{"a": 1, "b": 2, "c": 3}, 3},
		{
			"wrapped once: the oldest evicted", 3,
			[]*scheduler.Decision{dec("a", 1), dec("b", 2), dec("c", 3), dec("d", 4)},
			map[string]int{"a": -1, "b": 2, "c": 3, "d": 4},
			3,
		},
		{
			"wrapped twice", 2,
			[]*scheduler.Decision{dec("a", 1), dec("b", 2), dec("c", 3), dec("d", 4), dec("e", 5)},
			map[string]int{"a": -1, "b": -1, "c": -1, "d": 4, "e": 5},
			2,
		},
		{"size below 1 keeps one", 0, []*scheduler.Decision{dec("a", 1), dec("b", 2)}, map[string]int{"a": -1, "b": 2}, 1},
		{
			// A client reused the id: the later decision answers, and
			// evicting the earlier one's slot keeps the later.
			"a reused id: the latest wins and outlives the earlier's eviction", 2,
			[]*scheduler.Decision{dec("a", 1), dec("a", 2), dec("b", 3)},
			map[string]int{"a": 2, "b": 3},
			2,
		},
		{
			"a reused id: gone once its latest is evicted", 2,
			[]*scheduler.Decision{dec("a", 1), dec("a", 2), dec("b", 3), dec("c", 4)},
			map[string]int{"a": -1, "b": 3, "c": 4},
			2,
		},
		{
			"the same id filling the ring counts once", 3,
			[]*scheduler.Decision{dec("a", 1), dec("a", 2), dec("a", 3), dec("a", 4)},
			map[string]int{"a": 4},
			1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRing(tc.size)
			for _, d := range tc.records {
				r.Record(d)
			}
			for id, want := range tc.want {
				d, ok := r.Get(id)
				switch {
				case want < 0 && ok:
					t.Errorf("Get(%q) = decision %d, want none", id, d.MaxTokens)
				case want >= 0 && !ok:
					t.Errorf("Get(%q): none, want decision %d", id, want)
				case want >= 0 && d.MaxTokens != want:
					t.Errorf("Get(%q) = decision %d, want %d", id, d.MaxTokens, want)
				}
			}
			if got := r.Len(); got != tc.wantLen {
				t.Errorf("Len() = %d, want %d", got, tc.wantLen)
			}
		})
	}
}

// TestRingKeepsTheLastNAfterManyWraps: after any number of records the
// ring answers for exactly the last size request ids.
func TestRingKeepsTheLastNAfterManyWraps(t *testing.T) {
	const size, n = 7, 100
	r := NewRing(size)
	for i := range n {
		r.Record(dec(fmt.Sprint(i), i))
	}
	for i := range n {
		d, ok := r.Get(fmt.Sprint(i))
		if kept := i >= n-size; ok != kept || (ok && d.MaxTokens != i) {
			t.Fatalf("Get(%d) = %v, %v; want kept=%v", i, d, ok, kept)
		}
	}
}

// TestRingConcurrentWriters: records and reads from many goroutines at
// once (run with -race) leave the ring at capacity, holding only
// decisions that were recorded, each under its own id.
func TestRingConcurrentWriters(t *testing.T) {
	const size, writers, each = 64, 8, 500
	r := NewRing(size)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				r.Record(dec(fmt.Sprintf("w%d-%d", w, i), w*each+i))
			}
		}()
		go func() { // a reader beside each writer: explain calls meanwhile
			defer wg.Done()
			for i := range each {
				if d, ok := r.Get(fmt.Sprintf("w%d-%d", w, i)); ok && d.MaxTokens != w*each+i {
					t.Errorf("w%d-%d answered with decision %d", w, i, d.MaxTokens)
				}
				_ = r.Len()
			}
		}()
	}
	wg.Wait()
	if got := r.Len(); got != size {
		t.Fatalf("Len() = %d after %d records, want %d", got, writers*each, size)
	}
	// Every id held points at a slot's decision, recorded under that id.
	held := map[*scheduler.Decision]bool{}
	for _, d := range r.slots {
		held[d] = true
	}
	for id, d := range r.byID {
		if !held[d] || d.RequestID != id {
			t.Errorf("%s points at %v, not a held decision of its own", id, d)
		}
	}
}
