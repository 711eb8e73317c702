package stats

// Verdicts of a figure against its target, judged by the figure's
// interval: met when the whole interval is on the target's good side,
// missed when the whole of it is on the bad side, not settled when the
// interval straddles the target.
const (
	Met        = "met"
	Missed     = "missed"
	NotSettled = "not settled"
)

// AtMost judges e against an upper target t.
func AtMost(e Estimate, t float64) string {
	switch {
	case e.Hi <= t:
		return Met
	case e.Lo > t:
		return Missed
	}
	return NotSettled
}

// AtLeast judges e against a lower target t.
func AtLeast(e Estimate, t float64) string {
	switch {
	case e.Lo >= t:
		return Met
	case e.Hi < t:
		return Missed
	}
	return NotSettled
}
