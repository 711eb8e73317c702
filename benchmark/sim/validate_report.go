package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// Verdicts of a setup.
const (
	// VerdictAgrees: every figure of the simulator is inside the real
	// interval.
	VerdictAgrees = "agrees"
	// VerdictDiffers: at least one is outside (Outside names them).
	VerdictDiffers = "differs"
	// VerdictNotRun: the simulator cannot run the setup (Why says why).
	VerdictNotRun = "not run"
)

// Validation is the simulator set against one llm-bench compare result.
type Validation struct {
	Against   string        `json:"against"`
	Name      string        `json:"name"`
	Command   string        `json:"real_command"`
	Machine   string        `json:"real_machine"`
	Started   time.Time     `json:"real_started"`
	Trace     string        `json:"trace"`
	Workload  string        `json:"workload"`
	Fleet     string        `json:"fleet"`
	TimeScale float64       `json:"time_scale"`
	SLO       stats.SLO     `json:"slo"`
	Requests  int           `json:"requests_per_run"`
	Measured  [2]int        `json:"measured_window"`
	Setups    []SetupCheck  `json:"setups"`
	Wall      time.Duration `json:"wall_ns"`
}

// SetupCheck is one real setup at one load and the simulator's run of it.
type SetupCheck struct {
	Setup string  `json:"setup"`
	Load  float64 `json:"load"`
	// Sim is what the simulator ran in its place.
	Sim     string        `json:"sim"`
	Verdict string        `json:"verdict"`
	Why     string        `json:"why,omitempty"`
	Metrics []MetricCheck `json:"metrics,omitempty"`
	// Refused and TooLong count the simulator's requests, over seeds,
	// that no GPU took: refused by the router's queue (full, timed out,
	// past their TTFT objective), or too long for their GPU.
	Refused int `json:"refused,omitempty"`
	TooLong int `json:"too_long,omitempty"`
	// Served is, per GPU in fleet order, the measured requests it served
	// over the seeds, real and simulated.
	Served []Served `json:"served,omitempty"`
}

// Served is one GPU's share of the measured requests.
type Served struct {
	GPU  string `json:"gpu"`
	Real int    `json:"real"`
	Sim  int    `json:"sim"`
}

// MetricCheck is one figure, real and simulated.
type MetricCheck struct {
	Metric string         `json:"metric"`
	Real   stats.Estimate `json:"real"`
	Sim    stats.Estimate `json:"sim"`
	// Inside: the simulator's value is within the real interval [Lo, Hi].
	Inside bool `json:"inside"`
	// Overlap: the two intervals share a point.
	Overlap bool `json:"overlap"`
	// Ratio is the simulator's value over the real one (0 when the real
	// one is 0).
	Ratio float64 `json:"ratio"`
}

// Names of the figures compared, in table order: TTFT in ms, the good
// fraction (both SLOs) and the prefix hit rate as shares.
var validationMetrics = []string{"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "good_fraction", "prefix_hit_rate"}

func newValidation(rep *report.Report, source string) *Validation {
	var fl []string
	for _, g := range rep.Fleet {
		fl = append(fl, fmt.Sprintf("%s %s cap %d", g.ID, g.Profile, g.Cap))
	}
	return &Validation{
		Against: source, Name: rep.Name, Command: rep.Command, Machine: rep.Machine, Started: rep.Started,
		Trace: rep.Trace, Workload: rep.Workload, Fleet: strings.Join(fl, ", "), TimeScale: rep.TimeScale,
		SLO: rep.SLO, Requests: rep.Requests, Measured: rep.Measured,
	}
}

// checkMetric compares one simulated figure with the real one.
func checkMetric(name string, real, sim stats.Estimate) MetricCheck {
	m := MetricCheck{
		Metric: name, Real: real, Sim: sim,
		Inside:  real.Lo <= sim.Value && sim.Value <= real.Hi,
		Overlap: sim.Lo <= real.Hi && real.Lo <= sim.Hi,
	}
	if real.Value != 0 {
		m.Ratio = sim.Value / real.Value
	}
	return m
}

// judge sets c's figures and verdict from the simulator's runs.
func judge(c SetupCheck, real stats.Stats, runs []*RunResult, measured [2]int, slo stats.SLO) SetupCheck {
	sim, refused, tooLong := poolSim(runs, measured, slo)
	c.Refused, c.TooLong = refused, tooLong
	reals := []stats.Estimate{real.TTFT[0], real.TTFT[1], real.TTFT[2], real.Good, real.HitRate}
	sims := []stats.Estimate{sim.TTFT[0], sim.TTFT[1], sim.TTFT[2], sim.Good, sim.HitRate}
	var outside []string
	for i, name := range validationMetrics {
		m := checkMetric(name, reals[i], sims[i])
		c.Metrics = append(c.Metrics, m)
		if !m.Inside {
			outside = append(outside, name)
		}
	}
	c.Verdict = VerdictAgrees
	if len(outside) > 0 {
		c.Verdict, c.Why = VerdictDiffers, "outside: "+strings.Join(outside, ", ")
	}
	if refused > 0 {
		c.Why = strings.TrimPrefix(c.Why+fmt.Sprintf("; %d requests refused by the router", refused), "; ")
	}
	if tooLong > 0 {
		c.Why = strings.TrimPrefix(c.Why+fmt.Sprintf("; %d requests too long for their GPU", tooLong), "; ")
	}
	return c
}

// Tally counts the setups by verdict and the figures inside their real
// intervals (of the setups compared).
func (v *Validation) Tally() (byVerdict map[string]int, inside, figures int) {
	byVerdict = map[string]int{}
	for _, c := range v.Setups {
		byVerdict[c.Verdict]++
		for _, m := range c.Metrics {
			figures++
			if m.Inside {
				inside++
			}
		}
	}
	return byVerdict, inside, figures
}

// P50Offset is the median, over the setups compared, of the real TTFT
// p50 minus the simulator's (ms of GPU time): what the real stack adds to
// every request that the simulator leaves out (Envoy, the router, the
// client and gpusim's HTTP serving, each wall millisecond counting
// 1/time_scale of GPU time). ok is false when no setup was compared.
func (v *Validation) P50Offset() (ms float64, ok bool) {
	var d []float64
	for _, c := range v.Setups {
		if len(c.Metrics) > 0 {
			d = append(d, c.Metrics[0].Real.Value-c.Metrics[0].Sim.Value)
		}
	}
	if len(d) == 0 {
		return 0, false
	}
	return stats.SpreadOf(d).Median, true
}

// WriteValidationsJSON writes validations as indented JSON.
func WriteValidationsJSON(w io.Writer, vs []*Validation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(vs)
}

// WriteMarkdown writes the validation as a Markdown section: the real
// run, then one row per setup with every figure as
// `✓|✗ sim vs real [lo, hi] ratio`.
func (v *Validation) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## %s (`%s`)\n\n", v.Name, v.Against)
	fmt.Fprintf(w, "- Real: `%s`, %s, started %s, GPUs at time scale %g\n", v.Command, v.Machine, v.Started.Format(time.RFC3339), v.TimeScale)
	fmt.Fprintf(w, "- Fleet: %s\n", v.Fleet)
	fmt.Fprintf(w, "- Workload: %s, %s; %d requests a run, measured [%d, %d)\n", v.Trace, v.Workload, v.Requests, v.Measured[0], v.Measured[1])
	fmt.Fprintf(w, "- Goodput SLO: TTFT ≤ %v and the request's p99 inter-token gap ≤ %v (the simulator: its mean time per output token)\n", v.SLO.TTFT, v.SLO.ITL)
	by, in, n := v.Tally()
	fmt.Fprintf(w, "- Verdicts: %d agree, %d differ, %d not run; %d of %d figures inside the real interval; %.0f s of simulation\n\n",
		by[VerdictAgrees], by[VerdictDiffers], by[VerdictNotRun], in, n, v.Wall.Seconds())
	if off, ok := v.P50Offset(); ok {
		fmt.Fprintf(w, "Median over the setups compared of real − simulated TTFT p50: %.1f ms of GPU time, %.1f ms of wall time at time scale %g.\n\n",
			off, off*v.TimeScale, v.TimeScale)
	}
	fmt.Fprintln(w, "| setup | load | simulated as | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | good | prefix hit | verdict |")
	fmt.Fprintln(w, "|---|---:|---|---|---|---|---|---|---|")
	for _, c := range v.Setups {
		cells := make([]string, len(validationMetrics))
		for i := range cells {
			cells[i] = "–"
		}
		for i, m := range c.Metrics {
			cells[i] = metricCell(m)
		}
		verdict := c.Verdict
		if c.Why != "" {
			verdict += ": " + c.Why
		}
		fmt.Fprintf(w, "| %s | %.0f %% | %s | %s | %s |\n", c.Setup, 100*c.Load, c.Sim, strings.Join(cells, " | "), verdict)
	}
	fmt.Fprintln(w)
}

// metricCell renders a figure: ✓ inside or ✗ outside, the simulator's
// value vs the real value and interval, and the ratio.
func metricCell(m MetricCheck) string {
	f := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	if !strings.HasSuffix(m.Metric, "_ms") {
		f = func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	}
	mark := "✗"
	if m.Inside {
		mark = "✓"
	}
	ratio := "–"
	if m.Ratio != 0 {
		ratio = fmt.Sprintf("%.2f×", m.Ratio)
	}
	return fmt.Sprintf("%s %s vs %s [%s, %s] %s", mark, f(m.Sim.Value), f(m.Real.Value), f(m.Real.Lo), f(m.Real.Hi), ratio)
}
