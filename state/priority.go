package state

import "fmt"

// Priority is a request's class: who waits in the queue ahead of whom, who
// is shed first, and (through an API key) who may ask for what. The one
// name for the idea in every package: auth, config, scheduler and the stores.
type Priority string

// The priorities, best first.
const (
	PriorityCritical Priority = "critical"
	PriorityStandard Priority = "standard"
	PriorityBatch    Priority = "batch"
)

// Priorities lists every priority, best first (ranks 0, 1, 2).
func Priorities() [3]Priority {
	return [3]Priority{PriorityCritical, PriorityStandard, PriorityBatch}
}

// Rank orders priorities: lower is served first (critical 0, standard 1,
// batch 2). An unknown priority ranks as standard.
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityBatch:
		return 2
	}
	return 1
}

// Valid reports whether p is one of the three priorities.
func (p Priority) Valid() bool {
	return p == PriorityCritical || p == PriorityStandard || p == PriorityBatch
}

// OrStandard is p, or standard when p is empty (the default everywhere).
func (p Priority) OrStandard() Priority {
	if p == "" {
		return PriorityStandard
	}
	return p
}

// ParsePriority reads a priority by name; "" is standard.
func ParsePriority(s string) (Priority, error) {
	p := Priority(s).OrStandard()
	if !p.Valid() {
		return "", fmt.Errorf("priority %q: want critical, standard or batch", s)
	}
	return p, nil
}
