package compare

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// machineBudget is the budget of o's busiest run on the host, idleBusy
// cores being busy before the first run.
func machineBudget(o Options, seedCapacity map[uint64]float64, idleBusy float64) *report.Budget {
	peak := 0.0
	for _, load := range o.Loads {
		for _, seed := range o.Seeds {
			peak = max(peak, load*seedCapacity[seed])
		}
	}
	b := &report.Budget{WallRate: peak / o.TimeScale, IdleBusy: idleBusy}
	b.Need = report.StackCores + b.WallRate*report.CPUPerRequest.Seconds()
	b.Have = report.SaturationShare*float64(runtime.NumCPU()) - idleBusy
	if room := b.Have - report.StackCores; room > 0 {
		b.FitScale = peak * report.CPUPerRequest.Seconds() / room
	}
	return b
}

// unroutedShare is the share of a run's successful requests that may name
// no worker before the run counts as degraded (a few may lose the header
// to a retry's race; a router that fails open loses it on all).
const unroutedShare = 0.01

// degradedRouting says how a run did not schedule the whole fleet, ""
// when it did: successful requests that name no worker (x-routed-node
// absent: the router did not answer them, so Envoy's fail-open path
// routed them), or GPUs that served no request at all. At the loads
// compared every GPU serves some requests under any configuration that
// sees the whole fleet; one that serves none points at workers the
// configuration never considered (not scraped, not healthy, or starved).
func degradedRouting(s stats.Summary, gpus []string) string {
	var why []string
	named := 0
	for _, n := range s.PerWorker {
		named += n
	}
	if un := s.OK - named; s.OK > 0 && float64(un) > unroutedShare*float64(s.OK) {
		why = append(why, fmt.Sprintf("%d of %d successful requests name no worker", un, s.OK))
	}
	var idle []string
	for _, g := range gpus {
		if s.PerWorker[g] == 0 {
			idle = append(idle, g)
		}
	}
	if len(idle) > 0 && named > 0 {
		why = append(why, "no request served by "+strings.Join(idle, ", "))
	}
	return strings.Join(why, "; ")
}
