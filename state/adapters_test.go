package state

import (
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

func TestPlaceAdapter(t *testing.T) {
	t0 := time.UnixMilli(1000)
	ps, ev := PlaceAdapter(nil, "a", 2, t0)
	if ev != "" || len(ps) != 1 || ps[0].Active != 1 {
		t.Fatalf("first placement %+v, evicted %q", ps, ev)
	}
	ps = UnplaceAdapter(ps, "a")
	ps, _ = PlaceAdapter(ps, "b", 2, t0.Add(time.Second))
	ps = UnplaceAdapter(ps, "b")
	// Full: c evicts the least recently used idle one, a.
	ps, ev = PlaceAdapter(ps, "c", 2, t0.Add(2*time.Second))
	if ev != "a" || len(ps) != 2 {
		t.Fatalf("placements %+v, evicted %q; want a evicted", ps, ev)
	}
	if st := AdapterStateIn(ps, "c", 2); st != scoring.AdapterActive {
		t.Fatalf("c is %s; want active", st)
	}
	if st := AdapterStateIn(ps, "b", 2); st != scoring.AdapterIdle {
		t.Fatalf("b is %s; want idle", st)
	}
	if st := AdapterStateIn(ps, "a", 2); st != scoring.AdapterEvict {
		t.Fatalf("a is %s; want evict", st)
	}
	// Everything running: nothing evicted, the engine queues.
	ps, _ = PlaceAdapter(ps, "b", 2, t0.Add(3*time.Second))
	ps, ev = PlaceAdapter(ps, "d", 2, t0.Add(4*time.Second))
	if ev != "" || len(ps) != 3 {
		t.Fatalf("placements %+v, evicted %q; want none evicted", ps, ev)
	}
}

func TestSyncAdapters(t *testing.T) {
	at := time.UnixMilli(5000)
	ps := []AdapterPlacement{{Name: "idle-gone", Used: at}, {Name: "idle-listed", Used: at}, {Name: "busy", Active: 1, Used: at}}
	if got := SyncAdapters(ps, AdapterReport{}); len(got) != 3 {
		t.Fatalf("an unknown report changed the placements: %+v", got)
	}
	got := SyncAdapters(ps, AdapterReport{Listed: []Adapter{{Name: "idle-listed", Base: "m"}}, Waiting: []string{"new"}, At: at})
	names := map[string]int{}
	for _, p := range got {
		names[p.Name] = p.Active
	}
	if _, ok := names["idle-gone"]; ok || len(names) != 3 || names["busy"] != 1 {
		t.Fatalf("synced %+v; want idle-gone dropped, busy kept, new added", got)
	}
}
