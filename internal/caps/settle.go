package caps

import "time"

// The limit from the model is recomputed every monitor cycle (500 ms) from
// a fit that moves with every observation: its fast timescale (a 5 s
// half-life) follows a change of speed within seconds, and so follows the
// noise of the last few dozen requests too. Written as computed, the limit
// would step up and down by a request or two every cycle around its true
// value, and a load step, which moves the fast fit before the slow one
// agrees, would swing it further and back. settle keeps the written limit
// still unless the computed one says otherwise for long enough:
//
//   - A cut by more than the band is taken at once: a limit too high lets
//     requests miss their objectives now, while one too low only holds
//     them in the router's queue a little longer.
//   - Any other move (a raise, or a cut within the band) is taken only
//     once the computed limit has stayed on that side of the written one
//     for settleHold, then to the value nearest the written one seen
//     meanwhile (the least raise, the least cut): evidence that outlasts
//     the fast fit's half-life is the worker's, not noise. The computed
//     limit coming back to the written one, or crossing it, starts over.
//
// A limit therefore changes at most once per settleHold in either
// direction, except for cuts beyond the band, which a steady worker does
// not make twice.

// settleHold is how long the computed limit must stay above (or within
// the band below) the written one before the written one follows: the
// fast fit's half-life (latency.DefaultFastHalfLife), over which it
// forgets a transient.
const settleHold = 5 * time.Second

// settleBand is the relative cut taken at once: 10 %, about the latency
// model's median error (docs/latency-model.md): a computed limit closer
// than that to the written one is within what the model can tell apart.
const settleBand = 0.10

// band is the cut of a limit of v that settle takes at once: more than
// settleBand of v, and more than one request.
func band(v int) int { return max(1, int(settleBand*float64(v))) }

// settle is the limit to write, given the one in force (old) and the one
// computed now (raw, Value > 0).
func settle(old, raw Limit, now time.Time) Limit {
	if old.Basis != BasisModel || old.Value <= 0 {
		return raw // nothing from the model in force: take it
	}
	held := old
	held.Updated = now
	switch {
	case raw.Value == old.Value:
		held.Pending, held.PendingSince = 0, time.Time{}
		return held
	case raw.Value < old.Value-band(old.Value):
		return raw // a real cut, at once
	}
	up := raw.Value > old.Value
	if held.Pending == 0 || (held.Pending > old.Value) != up {
		held.Pending, held.PendingSince = raw.Value, now // a new move starts
		return held
	}
	// Keep the value nearest the one in force seen since the move began.
	if up {
		held.Pending = min(held.Pending, raw.Value)
	} else {
		held.Pending = max(held.Pending, raw.Value)
	}
	if now.Sub(held.PendingSince) < settleHold {
		return held
	}
	next := raw
	next.Value, next.Estimate = held.Pending, float64(held.Pending)
	return next
}
