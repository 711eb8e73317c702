package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/llm-router/llm-router/scheduler"
)

// printDisaggregation writes the decider's input and the prefill pick of a
// model with prefill workers (docs/disaggregation.md).
func printDisaggregation(w io.Writer, p *scheduler.PrefillDecision) {
	if p == nil {
		return
	}
	if p.Queued {
		fmt.Fprintln(w, "prefill   aggregated: the request waited in the queue, whose grants take a decode worker alone")
		return
	}
	verdict := "aggregated: prefilled on the decode worker"
	if p.Disaggregated {
		verdict = "disaggregated: prefill on " + p.Worker
	}
	fmt.Fprintf(w, "prefill   %s (%d prompt tokens uncached on the decode worker, threshold %d)\n",
		verdict, p.UncachedTokens, p.MinUncachedTokens)
	if len(p.Candidates) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tprefill worker\tactive/cap\ttotal\tterms\t")
	for _, l := range p.Candidates {
		mark := " "
		if l.Worker == p.Worker {
			mark = "*"
		}
		terms := make([]string, 0, len(l.Terms))
		for _, t := range l.Terms {
			terms = append(terms, fmt.Sprintf("%s=%.4g", t.Name, t.Value))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%s\t%s\t\n", mark, l.Worker, l.Active, CapString(l.Cap), total(l.Total), strings.Join(terms, " "))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "(prefill total = (prefill ahead + prompt past the worker's prefix match) / its prefill rate + 1 ms per request in flight; lowest wins)")
}
