package memory

import (
	"slices"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Seed replaces the store's content with a snapshot taken from another
// store and registers claims (id → worker) as held here. Each worker's count
// becomes the others' claims as of the snapshot (its count minus
// oursAtSnap, the claims of ours the snapshot included) plus ours now.
func (m *Store) Seed(snap state.Snapshot, claims map[string]string, oursAtSnap map[string]int) {
	m.lock()
	defer m.unlock()
	m.workers, m.order, m.claims, m.total = map[string]*memWorker{}, nil, map[string]*memClaim{}, 0
	for _, w := range snap.Workers {
		w.Spec.Models = slices.Clone(w.Spec.Models)
		w.InFlight = max(0, w.InFlight-oursAtSnap[w.Spec.ID])
		// Seeded claims carry no tokens, so the snapshot's token counts
		// could never be given back here: start from none.
		w.PrefillTokens, w.DecodeTokens, w.AheadTokens = 0, 0, 0
		w.LatencyStats = cloneLatency(w.LatencyStats)
		m.total += w.InFlight
		m.workers[w.Spec.ID] = &memWorker{Worker: w}
		m.order = append(m.order, w.Spec.ID)
	}
	far := m.now().Add(100 * 365 * 24 * time.Hour)
	for id, w := range claims {
		m.claims[id] = &memClaim{worker: w, expiry: far}
		if mw, ok := m.workers[w]; ok {
			mw.InFlight++
			m.total++
		}
	}
}
