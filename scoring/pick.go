package scoring

// Pick is the reference evaluation of a plan against live in-flight counts:
// among candidates not Full at active[i] (and available[i], when given), the
// lowest Curve.At(active[i]) wins, ties going to the lower index. It
// returns -1 when every candidate is full. The stores implement exactly this inside
// their atomic claim.
func Pick(cands []Candidate, active []int, available []bool) int {
	best := -1
	bestScore := 0.0
	for i, c := range cands {
		if c.Full(active[i]) || (available != nil && !available[i]) {
			continue
		}
		s := c.Curve.At(active[i])
		if best < 0 || s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// Full reports whether the candidate is at its Cap with active in-flight
// requests; a Cap of 0 is none, never full.
func (c Candidate) Full(active int) bool { return c.Cap > 0 && active >= c.Cap }

// Line is one candidate's line in a decision breakdown: the terms that do
// not depend on the live count (shared with the plan, never modified), the
// live count, and the total at that count. Total = (Σ contributions +
// ActiveWeight·Active)·LoadFactor.
type Line struct {
	Worker       string  `json:"worker"`
	Active       int     `json:"active"`
	Cap          int     `json:"cap"`
	Full         bool    `json:"full,omitempty"`
	ActiveWeight float64 `json:"active_weight,omitempty"`
	LoadFactor   float64 `json:"load_factor,omitempty"` // 1 + Mult·Active, when the strategy is multiplicative
	Terms        []Term  `json:"terms"`
	Total        float64 `json:"total"`
	// Adapter is where the request's adapter stood on the worker when
	// the claim read it (active, idle, free_slot, evict; "": no adapter).
	Adapter string `json:"adapter_state,omitempty"`
	// Ceiling is the candidate's LiveWeights.Ceiling (0: none), and Over
	// whether the live figures the claim read put it past it: the claim
	// skipped it as if full.
	Ceiling float64 `json:"ceiling,omitempty"`
	Over    bool    `json:"over_ceiling,omitempty"`
}

// PickLive is Pick with each candidate's LiveWeights scored on the live
// figures the claim read (live may be nil: no live part), skipping those
// whose live score passes their Ceiling; the stores implement exactly
// this.
func PickLive(cands []Candidate, p Prompt, active []int, live []Live, available []bool) int {
	best := -1
	bestScore := 0.0
	for i, c := range cands {
		if c.Full(active[i]) || (available != nil && !available[i]) {
			continue
		}
		s := c.Curve.At(active[i])
		if live != nil {
			if c.LiveWeights.Over(p, live[i]) {
				continue
			}
			s += LiveScore(c.LiveWeights, p, live[i])
		}
		if best < 0 || s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// Breakdown evaluates every candidate at the live counts the claim saw, so
// the decision log shows the numbers the choice was actually made on.
func Breakdown(cands []Candidate, active []int) []Line {
	return BreakdownLive(cands, Prompt{}, active, nil)
}

// BreakdownLive is Breakdown with the live terms (each of a candidate's
// LiveTerms, with prefix_match or prefix_unread, prefix_trust and
// prefill_guard beside them) appended to the candidates' terms and added
// to their totals; live may be nil.
func BreakdownLive(cands []Candidate, p Prompt, active []int, live []Live) []Line {
	out := make([]Line, len(cands))
	for i, c := range cands {
		a := 0
		if i < len(active) {
			a = active[i]
		}
		l := Line{Worker: c.Worker, Active: a, Cap: c.Cap, Full: c.Full(a), ActiveWeight: c.Curve.Slope, Terms: c.Terms, Total: c.Curve.At(a)}
		if i < len(live) && len(c.LiveTerms) > 0 {
			// A new slice: the plan's terms are shared, never modified.
			l.Terms = append(make([]Term, 0, len(c.Terms)+len(c.LiveTerms)+3), c.Terms...)
			l.Terms = appendLiveTerms(l.Terms, c, p, live[i])
			for _, t := range l.Terms[len(c.Terms):] {
				l.Total += t.Contribution()
			}
		}
		if i < len(live) {
			l.Ceiling, l.Over = c.LiveWeights.Ceiling, c.LiveWeights.Over(p, live[i])
		}
		if c.Curve.Mult != 0 {
			l.LoadFactor = 1 + c.Curve.Mult*float64(a)
		}
		out[i] = l
	}
	return out
}
