package state

import "math"

// Fair queuing within a priority band. Every queued request belongs to a
// tenant (QueueSpec.Tenant). Each model's queue keeps, per tenant, a
// virtual token counter (VTC): the weighted service the tenant was
// dispatched, in tokens. Within the best non-empty priority band the store
// dispatches the oldest waiter of the backlogged tenant with the least
// counter (ties: the tenant whose oldest waiter arrived first); between
// bands, strict priority holds. Each dispatch, from the queue or a direct
// claim, adds the request's QueueSpec.Cost to its tenant's counter, in the
// same atomic step; its release gives back the part of the charge for
// output the response did not produce (FairRefund). A tenant joining a
// band where it had no waiter is lifted to the least counter of the
// tenants backlogged there, so idling banks no credit; counters halve
// every Limits.FairHalfLife (0: never), so old service is forgotten. With a single tenant the order is the FCFS
// order by priority, then arrival.

// FairForget is the counter, in tokens, under which a decayed counter of
// a tenant with no waiter is forgotten (Pump prunes them), so that ids
// seen once do not stay forever.
const FairForget = 1e-3

// FairTie is the relative difference under which two counters are equal
// (the tie goes to the older waiter): a lifted counter and the one it was
// lifted to decay along different roundings (Redis keeps them as
// strings), and a last-digit difference must not reorder tenants.
const FairTie = 1e-9

// FairLess reports whether counter a is below counter b by more than
// FairTie.
func FairLess(a, b float64) bool { return a < b-FairTie*max(1, math.Abs(b)) }

// DefaultTenant is the tenant of requests that name none.
const DefaultTenant = "default"

// FairCost is the service a request is charged, in tokens: its prompt plus
// twice its expected output (output costs more to serve), over its
// tenant's weight (<= 0: 1). At least one token, so that requests of
// unknown size still take turns.
func FairCost(promptTokens, outputTokens int, weight float64) float64 {
	if weight <= 0 {
		weight = 1
	}
	return math.Max(1, float64(max(0, promptTokens)+2*max(0, outputTokens))) / weight
}

// FairRefund is what a release gives back to a tenant charged for
// charged output tokens, each at outputCost, when the response produced
// actual (0: unknown, nothing).
func FairRefund(charged, actual int, outputCost float64) float64 {
	if actual <= 0 || actual >= charged || outputCost <= 0 {
		return 0
	}
	return float64(charged-actual) * outputCost
}

// FairDecay is counter v, set at ms, as it stands at now ms: halved every
// halfLife ms (0: no decay). The Redis scripts compute the same
// (prelude.lua's fair_value).
func FairDecay(v float64, at, now, halfLife int64) float64 {
	if halfLife <= 0 || now <= at {
		return v
	}
	return v * math.Pow(0.5, float64(now-at)/float64(halfLife))
}

// MaxTenantLen is the longest tenant name: a fairness id, a key's tenant
// or fairness_ids entry.
const MaxTenantLen = 64

// ValidTenant reports whether s may name a tenant: 1 to MaxTenantLen
// characters of letters, digits, '.', '_', '-' and ':', starting with a
// letter or digit.
func ValidTenant(s string) bool {
	if s == "" || len(s) > MaxTenantLen {
		return false
	}
	for i, c := range []byte(s) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-' && c != ':')) {
			return false
		}
	}
	return true
}
