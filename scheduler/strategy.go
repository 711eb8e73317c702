package scheduler

import (
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// ClaimObserver is implemented by strategies that keep their own record of
// what this replica routed, as the schedulers they emulate do (a prefix
// index fed by routing decisions, per-worker in-flight counts). The
// scheduler calls Claimed once a claim for id succeeds on worker (also after
// a wait in the queue) and Released once when that claim is released,
// whatever ended the request. Calls may come from many goroutines at once.
// A strategy that does not implement it sees only the plan's inputs.
type ClaimObserver interface {
	Claimed(id string, job scoring.Job, worker string, now time.Time)
	Released(id string, now time.Time)
}

// newStrategy builds the named strategy from scoring's registry: the
// product's own, or any other a package linked into the binary registered
// (the benchmark's emulations of other schedulers, in llm-bench). Each
// Scheduler gets its own instance, so a strategy's state is per replica,
// as in the schedulers the emulations copy.
func newStrategy(name string, p scoring.Params) (scoring.Strategy, error) {
	return scoring.New(name, p)
}
