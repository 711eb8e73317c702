package memory

import (
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// The memory store's LoRA adapter placement (state.PlaceAdapter): each
// worker's placements live in its snapshot record (Worker.Adapters), each
// claim remembers the adapter it placed, and the claim, release, move and
// telemetry steps keep them in step under the store's one mutex.

// adapterState is the state of the claim's adapter on w for candidate c
// (AdapterNone with no adapter).
func adapterState(w *memWorker, c state.Candidate, adapter string) scoring.AdapterState {
	if adapter == "" {
		return scoring.AdapterNone
	}
	return state.AdapterStateIn(w.Adapters, adapter, c.Adapter.Slots)
}

// placeAdapter places the claim's adapter on its winner and returns what
// it evicted.
func (m *Store) placeAdapter(id, adapter string, w *memWorker, c state.Candidate, now time.Time) string {
	if adapter == "" {
		return ""
	}
	var evicted string
	w.Adapters, evicted = state.PlaceAdapter(w.Adapters, adapter, c.Adapter.Slots, now)
	if cl, ok := m.claims[id]; ok {
		cl.adapter = adapter
	}
	return evicted
}

// unplaceAdapter gives back claim c's request on its adapter.
func (m *Store) unplaceAdapter(c *memClaim) {
	if c.adapter == "" {
		return
	}
	if w, ok := m.workers[c.worker]; ok {
		w.Adapters = state.UnplaceAdapter(w.Adapters, c.adapter)
	}
}

// moveAdapter follows a claim Envoy moved to worker to: its request runs
// on the adapter there now (placed without eviction: it already runs).
func (m *Store) moveAdapter(c *memClaim, to *memWorker, now time.Time) {
	if c.adapter == "" {
		return
	}
	m.unplaceAdapter(c)
	i := slices.IndexFunc(to.Adapters, func(p state.AdapterPlacement) bool { return p.Name == c.adapter })
	to.Adapters = slices.Clone(to.Adapters)
	if i < 0 {
		to.Adapters = append(to.Adapters, state.AdapterPlacement{Name: c.adapter})
		i = len(to.Adapters) - 1
	}
	to.Adapters[i].Active++
	to.Adapters[i].Used = now
}

// sortedPlacements is a copy of ps by name, as the Redis store lists them.
func sortedPlacements(ps []state.AdapterPlacement) []state.AdapterPlacement {
	if len(ps) == 0 {
		return nil
	}
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b state.AdapterPlacement) int { return strings.Compare(a.Name, b.Name) })
	return out
}
