package report

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/stats"
)

// A run is void when its figures may describe something other than the
// configuration's scheduling. The reasons, each with its rule:
//
//   - machine busy: over SaturationShare of the machine's cores were busy
//     (with anything) during the run, so the proxies or the clients may
//     have waited for a core;
//   - host slow: the host-speed probe (host.Probe) read the host over
//     host.SlowLimit slower than before the first run through every
//     attempt (compare's runSteady);
//   - sender late: the load generator sent a request over senderLagLimit
//     after its arrival time, so it was starved of CPU and the loop was not
//     open;
//   - overload: no configuration kept up with the arrivals of the run's
//     load and seed (compare's overloaded).
//
// Void runs stay in the report with their own figures, marked. Overloaded
// ones are left out of the tables and aims (their figures describe the
// overload); the others stay in the tables, named in the report's header,
// as the machine's share of a difference cannot be taken out of them.
// A comparison whose every run is void measured nothing: compare.Compare
// still writes the whole report, and returns ErrVoid with the cause and
// the knob.
const (
	VoidMachineBusy = "machine busy"
	voidHostSlow    = "host slow"
	voidSenderLate  = "sender late"
	voidOverload    = "overload"
)

// senderLagLimit is the sender's lateness (wall time) past which a run is
// void: the overhead benchmark's rule for a sustained rate. Valid make
// bench runs were at most 32 ms late, most under 5.
const senderLagLimit = 100 * time.Millisecond

// ErrVoid is what compare.Compare returns, beside its complete report,
// when every run was void; the error's text names the cause and the
// option that fixes it.
var ErrVoid = errors.New("comparison void")

// VoidReasons lists why run is void, each reason with its figure; none
// when it is valid. overload is the comparison's overloaded (load, seed)
// pairs.
func (r *Run) VoidReasons(overload []string) []string {
	var why []string
	if r.Saturated {
		why = append(why, fmt.Sprintf("%s (%.2f of %d cores)", VoidMachineBusy, r.MachineCores, r.MachineCPUs))
	}
	if r.HostSlow() {
		why = append(why, fmt.Sprintf("%s (%.2fx)", voidHostSlow, r.HostSlowdown))
	}
	if stats.MsDuration(r.SenderLagMs) > senderLagLimit {
		why = append(why, fmt.Sprintf("%s (%.0f ms)", voidSenderLate, r.SenderLagMs))
	}
	for _, o := range overload {
		if o == OverloadKey(r.Summary.Load, r.Seed) {
			why = append(why, voidOverload)
			break
		}
	}
	return why
}

// RunLabel names a run as the log and the report do.
func RunLabel(r *Run) string {
	return fmt.Sprintf("%.0f%% seed %d %s", 100*r.Summary.Load, r.Seed, r.Summary.Setup)
}

// MarkVoid fills every run's Void and the report's Void list (after the
// capacity probes' entries, which are already there).
func (rep *Report) MarkVoid() {
	for _, run := range rep.Runs {
		run.Void = run.VoidReasons(rep.Overload)
		if len(run.Void) > 0 {
			rep.Void = append(rep.Void, RunLabel(run)+": "+strings.Join(run.Void, ", "))
		}
	}
}

// VoidError is ErrVoid with its cause and knob when every run of the
// comparison was void (or there was none), nil otherwise. report is where
// the report was written ("" when it was not).
func (rep *Report) VoidError(report string) error {
	counts := map[string]int{}
	for _, run := range rep.Runs {
		if len(run.Void) == 0 {
			return nil
		}
		for _, why := range run.Void {
			kind, _, _ := strings.Cut(why, " (")
			counts[kind]++
		}
	}
	n := len(rep.Runs)
	var msg string
	switch machine := counts[VoidMachineBusy] + counts[voidHostSlow] + counts[voidSenderLate]; {
	case n == 0:
		msg = "no run was made"
	case machine > 0:
		var parts []string
		for _, k := range []string{VoidMachineBusy, voidHostSlow, voidSenderLate, voidOverload} {
			if counts[k] > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d", k, counts[k]))
			}
		}
		msg = fmt.Sprintf("%s void (%s): the host could not keep up at --time-scale %g%s; raise --time-scale%s, leave out the heaviest --setups (several replicas) or lower --loads",
			allRuns(n), strings.Join(parts, ", "), rep.TimeScale, busyBefore(rep), fitScaleHint(rep))
	default:
		msg = fmt.Sprintf("%s void (overload in %d): no configuration kept up with the offered rate at any load and seed; lower --loads or give a --capacity below %.2f req/s",
			allRuns(n), counts[voidOverload], rep.Capacity.Rate)
		if rep.TimeScale < ShortTimeScale {
			msg += fmt.Sprintf(", or raise --time-scale to %g or more (below it the host may slow the simulated GPUs)", ShortTimeScale)
		}
	}
	if report != "" {
		msg += "; report: " + report
	}
	return fmt.Errorf("%w: %s", ErrVoid, msg)
}

func allRuns(n int) string {
	if n == 1 {
		return "the only run"
	}
	return fmt.Sprintf("all %d runs", n)
}

// busyBefore is " (N cores of M busy before the first run)" when other
// work already held the machine near its void line, "" otherwise.
func busyBefore(rep *Report) string {
	if b := rep.Budget; b != nil && b.Have <= StackCores {
		return fmt.Sprintf(" (%.2f of %d cores busy before the first run)", b.IdleBusy, runtime.NumCPU())
	}
	return ""
}

// fitScaleHint is " (to X or more)" when the report knows the scale that
// would fit the machine (Budget), "" otherwise.
func fitScaleHint(rep *Report) string {
	if b := rep.Budget; b != nil && b.FitScale > rep.TimeScale {
		return fmt.Sprintf(" (to %.2g or more)", b.FitScale)
	}
	return ""
}

// The machine's CPU budget for a comparison's runs: a model of the whole
// stack's CPU (gpusim, Envoy, the routers, Redis, the clients) against the
// offered rate in wall time, fitted to make bench's runs on a 2-core host
// (2026-12-02, Azure trace at time scale 0.15: the machine's busy
// cores against the wall-time rate, 150 to 320 requests a second). The
// heaviest setups (an emulation with three replicas, each scraping every
// GPU) used 0.45 cores at rest and 1.3 to 1.5 ms of CPU a request; Envoy
// alone about 0.2 cores and 0.3 ms. The heaviest is the budget, since one
// void run voids its seed's comparison.
const (
	StackCores    = 0.45
	CPUPerRequest = 1500 * time.Microsecond
)

// ShortTimeScale is the presets' time scale in their short version, the
// smallest the simulated GPUs were calibrated against.
const ShortTimeScale = 0.15

// Budget is the machine's CPU budget against the busiest run a comparison
// will offer, computed before the runs start.
type Budget struct {
	// WallRate is the busiest run's offered rate in requests a second of
	// wall time: its load times its seed's capacity, over the time scale.
	WallRate float64 `json:"wall_rate"`
	// Need is the cores the stack is expected to use then (StackCores and
	// CPUPerRequest); Have is what the machine gives before a run is
	// void: SaturationShare of its cores less what was busy before the
	// first run (IdleBusy).
	Need     float64 `json:"cores_needed"`
	Have     float64 `json:"cores_available"`
	IdleBusy float64 `json:"busy_cores_before"`
	// FitScale is the smallest time scale at which the busiest run fits
	// (0: none fits, the machine is busy already).
	FitScale float64 `json:"fit_time_scale"`
}

// Warning is a sentence for the log and the report when the busiest run
// will not fit the machine, "" when it will.
func (b *Budget) Warning(timeScale float64) string {
	if b == nil || b.Need <= b.Have {
		return ""
	}
	fix := "the machine is already busy: run when it is quieter"
	if b.FitScale > 0 {
		fix = fmt.Sprintf("--time-scale %.2g or more fits it; so may lower --loads or leaving out the heaviest --setups (several replicas)", b.FitScale)
	}
	return fmt.Sprintf("the busiest run offers %.0f requests a second of wall time at time scale %g; the stack needs about %.2f cores for it, and the host gives %.2f before a run is void (%.2f busy before the first run): expect void runs; %s",
		b.WallRate, timeScale, b.Need, max(b.Have, 0), b.IdleBusy, fix)
}
