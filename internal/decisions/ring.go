// Package decisions keeps recent scheduling decisions for explain: the last
// N in memory, and with Redis, a bounded stream that every replica can read.
package decisions

import (
	"sync"

	"github.com/llm-router/llm-router/scheduler"
)

// Ring keeps the last N decisions by request id. Several decisions may
// share a request id (a client reusing one); the latest wins.
type Ring struct {
	mu    sync.Mutex
	size  int
	slots []*scheduler.Decision
	next  int
	byID  map[string]*scheduler.Decision
}

var _ scheduler.Recorder = (*Ring)(nil)

// NewRing keeps up to size decisions (size < 1: 1).
func NewRing(size int) *Ring {
	size = max(size, 1)
	return &Ring{size: size, slots: make([]*scheduler.Decision, size), byID: make(map[string]*scheduler.Decision, size)}
}

// Record stores d, evicting the oldest when full.
func (r *Ring) Record(d *scheduler.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.slots[r.next]; old != nil && r.byID[old.RequestID] == old {
		delete(r.byID, old.RequestID)
	}
	r.slots[r.next] = d
	r.byID[d.RequestID] = d
	r.next = (r.next + 1) % r.size
}

// Get returns the latest decision for a request id.
func (r *Ring) Get(id string) (*scheduler.Decision, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.byID[id]
	return d, ok
}

// Len is the number of decisions held.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}
