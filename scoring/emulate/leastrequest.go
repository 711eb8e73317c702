package emulate

import "github.com/llm-router/llm-router/scoring"

// LeastRequestP2C emulates Envoy's LEAST_REQUEST load balancer with its
// defaults (choice_count 2, equal weights): of two hosts drawn at random,
// the one with fewer active requests. It is Envoy's own policy, not a
// router's scheduler: llm-bench compare runs the real Envoy for it, so
// only the fleet simulator registers this stand-in (SimulatorOnly).
const LeastRequestP2C = "least_request_p2c"

// notDrawn is the cost of a host the two choices did not draw: it is
// taken only when both drawn ones are at their cap (never, uncapped, as
// Envoy has none).
const notDrawn = 1e12

// NewLeastRequestP2C returns the emulation; it keeps no state.
func NewLeastRequestP2C() scoring.Strategy { return leastRequestP2C{} }

// leastRequestP2C draws the first two eligible workers, which arrive in a
// random order, and scores them by their live in-flight count (Slope 1,
// read inside the claim, as Envoy reads its own active-request counters);
// every other worker costs notDrawn. It keeps no state.
//
// Simplified: the in-flight count is the store's, over every router
// replica, where each Envoy counts only the requests it sent itself; with
// one replica they are the same.
type leastRequestP2C struct{}

func (leastRequestP2C) Name() string { return LeastRequestP2C }

func (leastRequestP2C) Plan(_ scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	out := make([]scoring.Candidate, len(eligible))
	for i, w := range eligible {
		c, undrawn := scoring.Curve{Slope: 1}, 0.0
		if i >= 2 {
			c, undrawn = scoring.Curve{Base: notDrawn}, 1
		}
		out[i] = scoring.Candidate{
			Worker: w.ID, Cap: w.MaxConcurrency, Curve: c,
			Terms: []scoring.Term{{Name: "not_drawn", Weight: notDrawn, Value: undrawn}},
		}
	}
	return out
}
