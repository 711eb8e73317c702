package compare

import (
	"context"
	"fmt"
	"slices"

	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// capacityPrecision is the relative width at which the search stops.
const capacityPrecision = 0.05

// measureCapacity finds the capacity of the fleet under o.CapacitySetup.
//
// Definition: a rate λ (req/s of GPU time) is sustainable when an
// open-loop run of o.ProbeRequests jobs of the workload arriving at λ
// through the capacity setup keeps the median TTFT of its measured jobs
// (the same warm-up and tail shares as the comparison's runs) at most
// o.CapacityTTFT (500 ms), with under 1 % errors. The capacity is the
// highest sustainable rate found by a search that starts at 85 % of the
// fleet estimate, moves by 15 % steps until it brackets the boundary, then
// bisects to 5 %, within o.MaxProbes probes.
//
// Why 500 ms and not the 2 s SLO: above capacity the backlog, and the
// median TTFT with it, grows for as long as the run lasts, so a 2 s bound
// is reached sooner by longer runs; a run short enough for a 2-core host
// needs a large overload to get there. Below capacity the median TTFT is a
// prefill and a short wait (about 100 ms on the benchmark fleet) and it climbs steeply only
// within a few percent of saturation, at any run length: in gpusim's
// virtual-time search on one A100 and the Azure conversation trace, 300
// requests put the 2 s boundary 24 % above the 2,000-request one, and
// the 500 ms boundary 3 % above it.
func measureCapacity(ctx context.Context, r *runner, w *loadgen.Workload, o Options) (report.Capacity, error) {
	c := report.Capacity{Setup: o.CapacitySetup.Name, Estimate: fleetEstimate(r.gpus), BoundMs: stats.Ms(o.CapacityTTFT), Requests: o.ProbeRequests}
	from, to := window(o.ProbeRequests, o.Warmup, o.Tail)
	probe := func(rate float64) (bool, error) {
		jobs := w.Jobs(o.ProbeRequests, rate, o.Seeds[0])
		run, err := r.run(ctx, o.CapacitySetup, jobs, from, to, fmt.Sprintf("capacity probe %.2f req/s", rate), true)
		if err != nil {
			return false, err
		}
		run.Summary.Rate = rate
		sm := run.Summary
		ok := sm.TTFTP50 <= c.BoundMs && !slices.Contains(sm.LowerBounds, "ttft_p50_ms") && sm.ErrorRate < 0.01
		if run.Saturated {
			c.Void = append(c.Void, fmt.Sprintf("capacity probe %.2f req/s: %s", rate, report.VoidMachineBusy))
		}
		c.Probes = append(c.Probes, report.Probe{Rate: rate, TTFTP50: sm.TTFTP50, Sustainable: ok, Saturated: run.Saturated, Run: run})
		logf(o.Log, "capacity probe %6.2f req/s %4.0fs: median TTFT %6.0f ms, %d errors -> %s%s", rate, run.WallSeconds, sm.TTFTP50, sm.Errors, sustainWord(ok), satMark(run.Saturated))
		return ok, nil
	}
	lo, hi := 0.0, 0.0
	rate := 0.85 * c.Estimate
	for len(c.Probes) < o.MaxProbes {
		ok, err := probe(rate)
		if err != nil {
			return c, err
		}
		if ok {
			lo = rate
		} else {
			hi = rate
		}
		switch {
		case hi == 0:
			rate *= 1.15
		case lo == 0:
			rate /= 1.15
		case (hi-lo)/lo <= capacityPrecision:
			c.Rate = lo
			return c, nil
		default:
			rate = (lo + hi) / 2
		}
	}
	if lo == 0 {
		return c, fmt.Errorf("capacity: no sustainable rate found down to %.2f req/s", rate*1.15)
	}
	c.Rate = lo
	return c, nil
}

func sustainWord(ok bool) string {
	if ok {
		return "sustainable"
	}
	return "not sustainable"
}
