package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
)

// This file explains the prefix cache's misses: for every request whose
// prompt shares leading blocks with an earlier one (a repeat), where the
// GPU it was sent to served less than half the shared part from cache,
// why no GPU that held (or was computing) that part was chosen, read from
// the product's own decision record (scheduler.Decision) and the engines'
// caches at the decision. It also counts how a prefix spreads: how many
// GPUs each group of prompts (those sharing a first block) reaches.

// Reasons a repeat missed its prefix (PrefixMisses.ByReason).
const (
	// MissQueued: the request waited in the router's queue and was
	// granted to a GPU without the prefix.
	MissQueued = "queued"
	// MissComputing: the GPU chosen had the prefix's earlier request in
	// flight, its prefill not done when this one was admitted.
	MissComputing = "computing_on_chosen"
	// MissEvicted: the GPU chosen had been sent the prefix before, but its
	// engine had evicted it (the router's index still held it).
	MissEvicted = "evicted_on_chosen"
	// MissEvictedAll: no engine held the prefix any more.
	MissEvictedAll = "evicted_everywhere"
	// MissHolderIneligible: no GPU holding it was a candidate.
	MissHolderIneligible = "holder_ineligible"
	// MissHolderFull: every holder was at its cap or limit.
	MissHolderFull = "holder_full"
	// MissHolderOver: every holder not full was past its ceiling (its
	// predicted TTFT over the request's objective).
	MissHolderOver = "holder_over_objective"
	// MissIndexLost: the best holder's index match was 0 though its
	// engine held the prefix.
	MissIndexLost = "holder_index_lost"
	// MissUnmatched: the strategy's decision record shows no router-side
	// match (the emulations' own indexes): the best holder scored higher.
	MissUnmatched = "holder_scored_higher"
	// MissCost*: the best holder scored higher than the GPU chosen; the
	// suffix names the part of the score with the largest difference:
	// the curve (the prediction's base and o·TPOT over the requests in
	// flight), the prefill ahead (ttft_prefill: the prefill queue and the
	// request's own uncached prompt), the decodes' slowdown of the
	// prefill (ttft_decode, ttft_decode_prefill), the stall.
	MissCostCurve = "holder_cost_curve"
	// MissCostCurvePrior: as MissCostCurve, with no candidate's model
	// known: every figure mostly the prior's, no exploration.
	MissCostCurvePrior = "holder_cost_curve_prior"
	// MissCostExplore: as MissCostCurve, in a decision where some
	// candidate's model was known and the holder's or the chosen GPU's
	// was not: predicted's exploration spreads an unknown model's base
	// over its first requests in flight, an idle unknown GPU ranking
	// first and a busy one far behind its prediction.
	MissCostExplore = "holder_cost_explore"
	MissCostPrefill = "holder_cost_prefill"
	MissCostDecode  = "holder_cost_decode"
	MissCostStall   = "holder_cost_stall"
	// MissOther: none of the above (the holder scored lower yet lost).
	MissOther = "other"
)

// missWindow is the width of PrefixMisses' time windows.
const missWindow = 5 * time.Second

// PrefixMisses is a run's account of its prefix misses.
type PrefixMisses struct {
	// Repeats are the requests sharing leading blocks with an earlier
	// one; Missed those served less than half the shared part from cache.
	Repeats  int            `json:"repeats"`
	Missed   int            `json:"missed"`
	ByReason map[string]int `json:"by_reason,omitempty"`
	// Windows count, per missWindow of arrival time, the repeats, those
	// sent to a GPU that had never been sent their group (new), and the
	// misses.
	Windows []MissWindow `json:"windows,omitempty"`
	// Groups is the number of groups; GroupGPUs the sum over groups of
	// the distinct GPUs each was sent to.
	Groups    int `json:"groups"`
	GroupGPUs int `json:"group_gpus"`
	// CostMisses count the misses where the best holder scored higher
	// (the holder_cost reasons); CurveGap sums, over them, how much
	// higher its curve was than the chosen GPU's, LiveGain how much lower
	// its live terms (the prefix hit's saving), in seconds.
	// Computing counts the misses whose holders were all still
	// computing the prefix (no engine had it cached at the decision).
	Computing  int     `json:"holders_computing"`
	CostMisses int     `json:"cost_misses"`
	CurveGap   float64 `json:"curve_gap_s"`
	LiveGain   float64 `json:"live_gain_s"`
}

// MissWindow is one window of PrefixMisses.
type MissWindow struct {
	Repeats int `json:"repeats"`
	New     int `json:"new_gpu"`
	Missed  int `json:"missed"`
}

// missTracker follows a run's placements for PrefixMisses.
type missTracker struct {
	seen    map[uint64]bool          // every block hash placed so far
	placed  map[uint64]map[int][]int // group → GPU → requests sent there
	shared  []int                    // per request: tokens shared with earlier ones
	reason  []string                 // per repeat: the reason if it missed
	gap     [][2]float64             // per cost reason: the curve gap and live gain
	pending []bool                   // per repeat: its holders were all computing
	newGPU  []bool
	arrival []time.Duration
}

func newMissTracker(n int) *missTracker {
	return &missTracker{
		seen: map[uint64]bool{}, placed: map[uint64]map[int][]int{},
		shared: make([]int, n), reason: make([]string, n), gap: make([][2]float64, n), pending: make([]bool, n), newGPU: make([]bool, n), arrival: make([]time.Duration, n),
	}
}

// place notes request i sent to GPU g on decision d (nil: none recorded).
func (r *runner) placeForMisses(i, g int, d *scheduler.Decision) {
	m := r.misses
	q := r.reqs[i]
	if m == nil || len(q.Blocks) == 0 {
		return
	}
	n := 0
	for n < len(q.Blocks) && m.seen[q.Blocks[n]] {
		n++
	}
	group := q.Blocks[0]
	gpus := m.placed[group]
	if gpus == nil {
		gpus = map[int][]int{}
		m.placed[group] = gpus
	}
	if n > 0 {
		m.shared[i] = min(n*scoring.BlockTokens, q.Prompt-1)
		m.arrival[i] = q.Arrival
		_, sent := gpus[g]
		m.newGPU[i] = !sent
		m.reason[i] = r.missReason(i, g, d, gpus)
	}
	gpus[g] = append(gpus[g], i)
	for _, h := range q.Blocks {
		m.seen[h] = true
	}
}

// holds reports whether GPU h holds request i's shared part now: in its
// engine's cache, or being computed by an earlier request of the group.
func (r *runner) holds(i, h int, gpus map[int][]int) (cached, computing bool) {
	q := r.reqs[i]
	if r.gpus[h].st.Cached(q.Prompt, q.Blocks)*2 >= r.misses.shared[i] {
		return true, false
	}
	for _, k := range gpus[h] {
		if r.res[k].FirstToken == 0 && r.res[k].Outcome == "" {
			return false, true
		}
	}
	return false, false
}

// missReason is why request i, sent to GPU g, would miss its prefix,
// should it (the result decides): "" when g holds it.
func (r *runner) missReason(i, g int, d *scheduler.Decision, gpus map[int][]int) string {
	cached, computing := r.holds(i, g, gpus)
	switch {
	case computing:
		return MissComputing
	case cached:
		return MissEvicted // it held it now; a miss is an eviction before admission
	}
	if _, sent := gpus[g]; sent {
		return MissEvicted
	}
	var holders []string
	r.misses.pending[i] = true
	for h := range r.gpus {
		c, p := r.holds(i, h, gpus)
		if c || p {
			holders = append(holders, r.gpus[h].id)
		}
		if c {
			r.misses.pending[i] = false
		}
	}
	switch {
	case len(holders) == 0:
		return MissEvictedAll
	case d == nil:
		return MissOther
	case d.QueuePosition > 0:
		return MissQueued
	}
	var chosen *scoring.Line
	var best *scoring.Line
	eligible, open := false, false
	for k := range d.Candidates {
		l := &d.Candidates[k]
		if l.Worker == d.Worker {
			chosen = l
		}
		if !slices.Contains(holders, l.Worker) {
			continue
		}
		eligible = true
		if l.Full {
			continue
		}
		open = true
		if l.Over {
			continue
		}
		if best == nil || l.Total < best.Total {
			best = l
		}
	}
	switch {
	case !eligible:
		return MissHolderIneligible
	case !open:
		return MissHolderFull
	case best == nil:
		return MissHolderOver
	case chosen == nil:
		return MissOther
	}
	if !hasTerm(best, "prefix_match") && !hasTerm(best, "prefix_unread") {
		return MissUnmatched
	}
	if termValue(best, "prefix_match") == 0 && termValue(best, "prefix_unread") == 0 {
		return MissIndexLost
	}
	if best.Total <= chosen.Total {
		return MissOther
	}
	reason, gap := costReason(best, chosen)
	r.misses.gap[i] = gap
	if reason != MissCostCurve {
		return reason
	}
	unknown := lineUnknown(best) || lineUnknown(chosen)
	switch {
	case unknown && slices.ContainsFunc(d.Candidates, func(l scoring.Line) bool { return !lineUnknown(&l) }):
		return MissCostExplore
	case unknown:
		return MissCostCurvePrior
	}
	return reason
}

// costReason names the part of the score where holder's exceeds chosen's
// the most, and gives how much higher holder's curve is and how much
// lower its live terms.
func costReason(holder, chosen *scoring.Line) (string, [2]float64) {
	parts := func(l *scoring.Line) (curve, prefill, decode, stall float64) {
		curve = l.Total
		for _, t := range l.Terms {
			c := t.Contribution()
			switch t.Name {
			case "ttft_prefill":
				prefill += c
			case "ttft_decode", "ttft_decode_prefill":
				decode += c
			case "prefill_stall":
				stall += c
			default:
				continue
			}
			curve -= c
		}
		return curve, prefill, decode, stall
	}
	hc, hp, hd, hs := parts(holder)
	cc, cp, cd, cs := parts(chosen)
	gap := [2]float64{hc - cc, (cp + cd + cs) - (hp + hd + hs)}
	reason, most := MissCostCurve, hc-cc
	for _, p := range []struct {
		name string
		diff float64
	}{{MissCostPrefill, hp - cp}, {MissCostDecode, hd - cd}, {MissCostStall, hs - cs}} {
		if p.diff > most {
			reason, most = p.name, p.diff
		}
	}
	return reason, gap
}

func hasTerm(l *scoring.Line, name string) bool {
	return slices.ContainsFunc(l.Terms, func(t scoring.Term) bool { return t.Name == name })
}

// lineUnknown reports whether any of the line's terms was unknown (for
// predicted: the worker's TTFT or TPOT model).
func lineUnknown(l *scoring.Line) bool {
	return slices.ContainsFunc(l.Terms, func(t scoring.Term) bool { return t.Unknown })
}

func termValue(l *scoring.Line, name string) float64 {
	for _, t := range l.Terms {
		if t.Name == name {
			return t.Value
		}
	}
	return 0
}

// result is the run's PrefixMisses; nil when no request shared blocks.
func (m *missTracker) result(res []Result) *PrefixMisses {
	if m == nil || len(m.placed) == 0 {
		return nil
	}
	out := &PrefixMisses{ByReason: map[string]int{}, Groups: len(m.placed)}
	for _, gpus := range m.placed {
		out.GroupGPUs += len(gpus)
	}
	for i, s := range m.shared {
		if s == 0 {
			continue
		}
		w := int(m.arrival[i] / missWindow)
		for len(out.Windows) <= w {
			out.Windows = append(out.Windows, MissWindow{})
		}
		out.Repeats++
		out.Windows[w].Repeats++
		if m.newGPU[i] {
			out.Windows[w].New++
		}
		if res[i].Outcome != OutcomeOK || res[i].Cached*2 >= s {
			continue
		}
		out.Missed++
		out.Windows[w].Missed++
		out.ByReason[m.reason[i]]++
		if m.pending[i] && strings.HasPrefix(m.reason[i], "holder_") {
			out.Computing++
		}
		if strings.HasPrefix(m.reason[i], "holder_cost") {
			out.CostMisses++
			out.CurveGap += m.gap[i][0]
			out.LiveGain += m.gap[i][1]
		}
	}
	return out
}

// missReasons is the order of PrefixMisses' reasons in the report.
var missReasons = []string{
	MissQueued, MissComputing, MissEvicted, MissEvictedAll, MissHolderIneligible, MissHolderFull,
	MissHolderOver, MissIndexLost, MissUnmatched, MissCostExplore, MissCostCurvePrior, MissCostCurve, MissCostPrefill, MissCostDecode, MissCostStall, MissOther,
}

// writeMisses writes the prefix misses by reason and the spread of
// groups over GPUs, pooled over seeds, when any run had repeats.
func (r *Report) writeMisses(w io.Writer) {
	header := false
	for _, m := range r.Summaries {
		if len(m.Misses) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nPrefix misses: repeats are requests sharing leading blocks with an earlier one; a miss served under half the shared part from cache. Each miss by why no GPU holding (or computing) the prefix was chosen, in % of misses, pooled over seeds (misses.go names the reasons); GPUs per group is the mean of distinct GPUs a group's requests were sent to; new GPU per window is the share of repeats sent to a GPU new to their group, by 5 s of arrival (misses in brackets).")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| strategy | replicas | QPS | repeats | missed (per seed) | reasons | GPUs per group | new GPU per window |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---|---|---:|---|")
			header = true
		}
		var pool PrefixMisses
		pool.ByReason = map[string]int{}
		var seeds, windows []string
		for _, x := range m.Misses {
			pool.Repeats += x.Repeats
			pool.Missed += x.Missed
			pool.Groups += x.Groups
			pool.GroupGPUs += x.GroupGPUs
			for k, v := range x.ByReason {
				pool.ByReason[k] += v
			}
			for i, win := range x.Windows {
				for len(pool.Windows) <= i {
					pool.Windows = append(pool.Windows, MissWindow{})
				}
				pool.Windows[i].Repeats += win.Repeats
				pool.Windows[i].New += win.New
				pool.Windows[i].Missed += win.Missed
			}
			seeds = append(seeds, fmt.Sprint(x.Missed))
		}
		var reasons []string
		for _, k := range missReasons {
			if v := pool.ByReason[k]; v > 0 {
				reasons = append(reasons, fmt.Sprintf("%s %.0f", k, 100*float64(v)/float64(pool.Missed)))
			}
		}
		for _, win := range pool.Windows {
			windows = append(windows, fmt.Sprintf("%.0f (%d)", 100*float64(win.New)/float64(max(win.Repeats, 1)), win.Missed))
		}
		fmt.Fprintf(w, "| %s | %d | %g | %d | %d (%s) | %s | %.2f | %s |\n", m.Strategy, m.Replicas, m.QPS,
			pool.Repeats, pool.Missed, strings.Join(seeds, ", "), strings.Join(reasons, ", "),
			float64(pool.GroupGPUs)/float64(max(pool.Groups, 1)), strings.Join(windows, " "))
	}
}
