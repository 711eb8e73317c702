package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scheduler"
)

// printAdapter writes the adapter's part of a decision: the adapter and
// its base, its state on each candidate and on the claimed worker, the
// eviction, the load time counted, the loads and the wait for another
// request's load.
func printAdapter(w io.Writer, d *scheduler.Decision) {
	a := d.Adapter
	if a == nil {
		return
	}
	fmt.Fprintf(w, "adapter   %s (LoRA of %s)", a.Name, a.Base)
	if a.State != "" {
		fmt.Fprintf(w, ", %s on the claimed worker", a.State)
	}
	if a.LoadSeconds > 0 {
		fmt.Fprintf(w, ", a load of %s counted in the prediction", seconds(a.LoadSeconds))
	}
	if a.Evicted != "" {
		fmt.Fprintf(w, ", evicting %s", a.Evicted)
	}
	fmt.Fprintln(w)
	var states []string
	for _, c := range d.Candidates {
		if c.Adapter != "" {
			states = append(states, c.Worker+" "+c.Adapter)
		}
	}
	if len(states) > 0 {
		fmt.Fprintf(w, "placement %s\n", strings.Join(states, ", "))
	}
	for _, l := range a.Loads {
		if l.Error != "" {
			fmt.Fprintf(w, "load      on %s failed after %s: %s\n", l.Worker, seconds(l.Seconds), l.Error)
			continue
		}
		fmt.Fprintf(w, "load      on %s in %s\n", l.Worker, seconds(l.Seconds))
	}
	if a.Waited > 0 {
		fmt.Fprintf(w, "waited    %s for another request's load of the adapter\n", time.Duration(a.Waited*float64(time.Second)).Round(time.Millisecond))
	}
}
