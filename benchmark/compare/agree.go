package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// Agreement is how several runs of one comparison agree on one setup's
// p90 TTFT: whether their 95 % intervals share a common value.
type Agreement struct {
	Setup string  `json:"setup"`
	Load  float64 `json:"load"`
	// P90 is each run's p90 TTFT estimate, in the order given.
	P90 []stats.Estimate `json:"p90"`
	// Agree is true when every interval overlaps every other (so all
	// share one value: intervals on a line that overlap pairwise have a
	// common point).
	Agree bool `json:"agree"`
	// WithinAgree is the same check on the intervals without the seed
	// level (Estimate.Within): stricter, shown beside, never the verdict.
	// WithinKnown is false when a run has no such interval (a report
	// written before it existed): then WithinAgree says nothing.
	WithinAgree bool `json:"agree_within_seeds"`
	WithinKnown bool `json:"within_seeds_known"`
}

// Agree reads compare-*.json reports of several runs of one comparison and
// checks, setup by setup, that their p90 TTFT intervals overlap.
func Agree(paths []string) ([]Agreement, error) {
	if len(paths) < 2 {
		return nil, fmt.Errorf("need at least two reports, got %d", len(paths))
	}
	reps := make([]report.Report, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &reps[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if reps[i].Name != reps[0].Name {
			return nil, fmt.Errorf("%s is comparison %q, %s is %q", p, reps[i].Name, paths[0], reps[0].Name)
		}
	}
	var out []Agreement
	for _, s := range reps[0].Stats {
		if len(s.Seeds) == 0 {
			continue
		}
		a := Agreement{Setup: s.Setup, Load: s.Load, Agree: true, WithinAgree: true, WithinKnown: true}
		for _, r := range reps {
			i := slices.IndexFunc(r.Stats, func(o stats.Stats) bool { return o.Setup == s.Setup && o.Load == s.Load && len(o.Seeds) > 0 })
			if i < 0 {
				a.Agree, a.WithinAgree = false, false
				continue
			}
			a.P90 = append(a.P90, r.Stats[i].TTFT[1])
		}
		for i := range a.P90 {
			for k := range i {
				a.Agree = a.Agree && a.P90[i].Overlaps(a.P90[k])
				wi, wk := a.P90[i].Within, a.P90[k].Within
				if wi == nil || wk == nil {
					a.WithinKnown = false
					continue
				}
				a.WithinAgree = a.WithinAgree && wi[0] <= wk[1] && wk[0] <= wi[1]
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// PrintAgreement writes the agreement table; it reports whether all agree.
func PrintAgreement(w io.Writer, as []Agreement) bool {
	all := true
	fmt.Fprintln(w, "| setup | load | p90 TTFT ms, each run [95% interval] | overlap | without the seed level |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	agree, known, agreeWithin := 0, 0, 0
	for _, a := range as {
		cells := ""
		for i, e := range a.P90 {
			if i > 0 {
				cells += "; "
			}
			cells += report.MsCell(e)
		}
		within := "n/a"
		if a.WithinKnown {
			within = report.YesNo(a.WithinAgree)
		}
		fmt.Fprintf(w, "| %s | %.0f%% | %s | %s | %s |\n", a.Setup, 100*a.Load, cells, report.YesNo(a.Agree), within)
		all = all && a.Agree
		if a.Agree {
			agree++
		}
		if a.WithinKnown {
			known++
			if a.WithinAgree {
				agreeWithin++
			}
		}
	}
	fmt.Fprintf(w, "\n%d of %d overlap; %d of %d on the intervals without the seed level (within seeds: stricter, they miss the spread between runs).\n", agree, len(as), agreeWithin, known)
	return all
}
