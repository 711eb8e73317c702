package fairness

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes the results: per scenario, each dispatcher's tenants'
// rates against their demand and fair share, waits, Jain's index and the
// service spread in units of VTC's bound.
func Markdown(w io.Writer, scs []Scenario, rs []Result, command string) {
	fmt.Fprintf(w, "Command: `%s`\n\n", command)
	fmt.Fprintf(w, "Means over %d seeds with 95%% bootstrap intervals over seeds. Rates in requests/s after warm-up; "+
		"waits in seconds (requests dispatched after warm-up); Jain over each tenant's rate / its max-min fair share; "+
		"spread = largest |W_a - W_b| (weighted service dispatched) over any interval after warm-up in which both are backlogged, over VTC's bound 2U (U: the largest request's cost, input + 2 x output tokens).\n", seedsOf(rs))
	for _, sc := range scs {
		fmt.Fprintf(w, "\n### %s: %d workers x %d slots, %s (%s warm-up)\n\n", sc.Name, sc.Workers, sc.Cap, sc.Duration, sc.Warmup)
		var ts []string
		for _, t := range sc.Tenants {
			d := fmt.Sprintf("%s %.2g req/s", t.Name, t.Rate)
			if t.On > 0 {
				d += fmt.Sprintf(" (%s on / %s off)", t.On, t.Off)
			}
			ts = append(ts, d)
		}
		fmt.Fprintf(w, "Tenants: %s.\n\n", strings.Join(ts, ", "))
		head := "| dispatcher |"
		rule := "|---|"
		for _, t := range sc.Tenants {
			head += fmt.Sprintf(" %s rate | %s wait mean / p90 |", t.Name, t.Name)
			rule += "---|---|"
		}
		fmt.Fprintf(w, "%s Jain | spread / 2U |\n%s---|---|\n", head, rule)
		for _, r := range rs {
			if r.Scenario != sc.Name {
				continue
			}
			row := "| " + r.Dispatcher + " |"
			for i := range sc.Tenants {
				row += " " + fmtI(r.over(func(f Figures) float64 { return f.Rate[i] }), 2) + " |"
				row += fmt.Sprintf(" %.1f / %.1f |", r.over(func(f Figures) float64 { return f.WaitMean[i] }).Mean,
					r.over(func(f Figures) float64 { return f.WaitP90[i] }).Mean)
			}
			row += " " + fmtI(r.over(func(f Figures) float64 { return f.Jain }), 3) + " |"
			if len(sc.Pairs) > 0 {
				row += " " + fmtI(r.over(func(f Figures) float64 { return f.Spread }), 2) + " |"
			} else {
				row += " - |"
			}
			fmt.Fprintln(w, row)
		}
		if len(sc.Pairs) > 0 {
			for _, r := range rs {
				if r.Scenario == sc.Name && r.Dispatcher == DispatchFair {
					worst := 0.0
					for _, f := range r.Seeds {
						worst = max(worst, f.Spread)
					}
					verdict := "met"
					if worst > 2 {
						verdict = "NOT met"
					}
					fmt.Fprintf(w, "\nFair queue: worst spread of any seed %.2f x 2U (aim: within 2x VTC's bound): %s.\n", worst, verdict)
				}
			}
		}
	}
}

func seedsOf(rs []Result) int {
	if len(rs) == 0 {
		return 0
	}
	return len(rs[0].Seeds)
}

func fmtI(i Interval, digits int) string {
	return fmt.Sprintf("%.*f [%.*f, %.*f]", digits, i.Mean, digits, i.Lo, digits, i.Hi)
}
