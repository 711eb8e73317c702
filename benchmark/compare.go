package benchmark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/llm-router/llm-router/config"
)

// CompareOptions configure Compare.
type CompareOptions struct {
	BinDir   string
	Fleet    string // ParseFleet syntax
	Workload WorkloadOptions
	// TimeScale is the fleet's slowdown: every simulated duration is
	// multiplied by it and every measured one divided by it, so results are
	// in GPU time whatever the machine needed.
	TimeScale float64
	Setups    []Setup
	Loads     []float64 // shares of the measured capacity
	Requests  int       // jobs per run
	// Warmup and Tail are the shares of each run's jobs before and after
	// the measured window: the first load an idle fleet and warm the
	// router's averages, the last keep the load steady until the measured
	// ones end.
	Warmup, Tail float64
	Seed         uint64
	SLO          SLO
	// Capacity, when positive, is used instead of measuring it.
	Capacity      float64
	CapacitySetup Setup
	// CapacityTTFT is the median TTFT a sustainable rate stays under.
	CapacityTTFT  time.Duration
	ProbeRequests int
	MaxProbes     int
	// SizingRequests is the length of the virtual-time replays that size
	// each GPU (SizeFleet).
	SizingRequests int
	// Grace bounds the wait (GPU time) for a run's measured requests after
	// its last arrival; what is still running then is cut.
	Grace        time.Duration
	SamplePeriod time.Duration
	ResultsDir   string
	Command      string
	Progress     io.Writer // progress bars
	Log          io.Writer // one line per run
}

// DefaultSetups are the configurations compared: Envoy alone with its two
// usual policies, and the router with every strategy.
func DefaultSetups() []Setup {
	out := []Setup{EnvoySetup("ROUND_ROBIN"), EnvoySetup("LEAST_REQUEST")}
	for _, s := range config.Strategies {
		out = append(out, RouterSetup(s))
	}
	return out
}

// DefaultCompareOptions is the long comparison.
func DefaultCompareOptions() CompareOptions {
	return CompareOptions{
		BinDir: "bin", Fleet: DefaultFleet, TimeScale: 1,
		Workload: WorkloadOptions{TracePath: "benchmark/traces/azure-conv-2023.csv", Kind: KindTrace, Arrivals: ArrivalsPoisson, LongShare: 0.25},
		Setups:   DefaultSetups(), Loads: []float64{0.6, 0.8, 0.95},
		Requests: 1200, Warmup: 0.1, Tail: 0.2, Seed: 1, SLO: DefaultSLO(),
		CapacitySetup: EnvoySetup("LEAST_REQUEST"), CapacityTTFT: 500 * time.Millisecond, ProbeRequests: 2000, MaxProbes: 6, SizingRequests: 2000,
		Grace: 3 * time.Minute, SamplePeriod: 250 * time.Millisecond, ResultsDir: "benchmark/results",
	}
}

// CompareReport is everything one comparison measured.
type CompareReport struct {
	Command   string    `json:"command"`
	Machine   string    `json:"machine"`
	Started   time.Time `json:"started"`
	WallTime  float64   `json:"wall_seconds"`
	Workload  string    `json:"workload"`
	Trace     string    `json:"trace"`
	Fleet     []GPU     `json:"fleet"`
	TimeScale float64   `json:"time_scale"`
	SLO       SLO       `json:"slo"`
	Requests  int       `json:"requests_per_run"`
	Measured  [2]int    `json:"measured_window"` // job indexes [from, to)
	Capacity  Capacity  `json:"capacity"`
	Loads     []float64 `json:"loads"`
	Runs      []*Run    `json:"runs"`
	Aims      []Aim     `json:"aims"`
	// Void lists the runs during which the machine was saturated.
	Void  []string `json:"void,omitempty"`
	Notes []string `json:"notes"`
}

// Compare runs every setup at every load on one fleet and one workload.
func Compare(ctx context.Context, o CompareOptions) (*CompareReport, error) {
	started := time.Now()
	if o.TimeScale <= 0 || o.Requests < 20 || o.Warmup < 0 || o.Tail < 0 || o.Warmup+o.Tail >= 0.9 {
		return nil, errors.New("compare: need time scale > 0, at least 20 requests, warm-up + tail < 0.9")
	}
	w, err := LoadWorkload(o.Workload)
	if err != nil {
		return nil, err
	}
	gpus, err := ParseFleet(o.Fleet)
	if err != nil {
		return nil, err
	}
	logf(o.Log, "sizing the fleet on %s (virtual time)", w.Source)
	if err := SizeFleet(gpus, w.Jobs(o.SizingRequests, 1, o.Seed)); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "llmr-compare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := newEnv(o.BinDir, dir)
	if err != nil {
		return nil, err
	}
	fleet, err := startFleet(ctx, o.BinDir, dir, gpus, o.TimeScale, nil)
	if err != nil {
		return nil, err
	}
	defer fleet.Stop(5 * time.Second)
	for _, g := range gpus {
		logf(o.Log, "  %-8s %-16s %s  alone: %.2f req/s  cap %d", g.ID, g.Profile, g.Addr, g.SaturationRate, g.Cap)
	}

	r := &runner{
		env: e, fleet: fleet, gpus: gpus, scale: o.TimeScale, slo: o.SLO, progress: o.Progress,
		sample: o.SamplePeriod, grace: time.Duration(float64(o.Grace) * o.TimeScale),
		workers: func(s Setup) []config.Worker {
			if s.Uncapped() {
				return routerWorkers(gpus, uncapped)
			}
			return routerWorkers(gpus, 0)
		},
		mutate: func(s Setup, c *config.Config) { benchRouterConfig(s, c, o.TimeScale) },
	}
	rep := &CompareReport{
		Command: o.Command, Machine: Machine(), Started: started, Workload: w.Name(), Trace: w.Source,
		Fleet: gpus, TimeScale: o.TimeScale, SLO: o.SLO, Requests: o.Requests, Loads: o.Loads,
	}
	from, to := window(o.Requests, o.Warmup, o.Tail)
	rep.Measured = [2]int{from, to}

	if o.Capacity > 0 {
		rep.Capacity = Capacity{Setup: "given (--capacity)", Rate: o.Capacity, Estimate: fleetEstimate(gpus)}
	} else {
		rep.Capacity, err = measureCapacity(ctx, r, w, o)
		if err != nil {
			return nil, err
		}
		rep.Void = append(rep.Void, rep.Capacity.void...)
	}
	logf(o.Log, "capacity: %.2f req/s (%s)", rep.Capacity.Rate, rep.Capacity.Setup)

	for _, load := range o.Loads {
		rate := load * rep.Capacity.Rate
		jobs := w.Jobs(o.Requests, rate, o.Seed)
		for _, s := range o.Setups {
			label := fmt.Sprintf("%3.0f%% %s", 100*load, s.Name)
			run, err := r.run(ctx, s, jobs, from, to, label, false)
			if err != nil {
				return nil, err
			}
			run.Summary.Load, run.Summary.Rate = load, rate
			rep.Runs = append(rep.Runs, run)
			sm := run.Summary
			logf(o.Log, "%-34s %4.0fs  ttft p50 %7.0f p99 %7.0f ms  e2e p99 %7.0f ms  good %5.1f%%  err %d  cpu %.2f cores (machine %.2f/%d)%s",
				label, run.WallSeconds, sm.TTFTP50, sm.TTFTP99, sm.E2EP99, 100*sm.GoodFraction, sm.Errors, run.Cores, run.MachineCores, run.MachineCPUs, satMark(run.Saturated))
			if run.Saturated {
				rep.Void = append(rep.Void, label)
			}
		}
	}
	rep.Aims = computeAims(rep.Runs, 0.8)
	rep.Notes = compareNotes(o)
	rep.WallTime = time.Since(started).Seconds()
	if o.ResultsDir != "" {
		if err := writeCompare(o.ResultsDir, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// uncapped is the "no cap" of the emulations of other schedulers
// (Setup.Uncapped): the schedulers they emulate have none.
const uncapped = 1 << 20

// benchRouterConfig adjusts the router's config for the benchmark:
//   - the queue holds every burst (Envoy alone queues without limit at the
//     GPUs, so a router that shed load would win on latency by refusing
//     work) and waits up to 10 minutes;
//   - decision logs off (warn level): they are the router's biggest CPU
//     cost on two shared cores, and no table reads them;
//   - every period that bounds how fresh the router's knowledge of the GPUs
//     is runs timeScale times slower, as the GPUs do;
//   - the emulations of the Gateway API Inference Extension scrape every
//     50 ms of GPU time, as it does (Setup.FastScrape).
func benchRouterConfig(s Setup, c *config.Config, timeScale float64) {
	c.LogLevel = "warn"
	c.Queue.MaxQueueSize = 100000
	c.Queue.Timeout = config.Timeouts{
		Critical: config.Duration(10 * time.Minute), Standard: config.Duration(10 * time.Minute), Batch: config.Duration(10 * time.Minute),
	}
	scale := func(d config.Duration) config.Duration { return config.Duration(float64(d) * timeScale) }
	c.RefreshInterval = scale(c.RefreshInterval)
	c.InferenceAware.Staleness = scale(c.InferenceAware.Staleness)
	if s.FastScrape() {
		c.Telemetry.ScrapeInterval = config.Duration(50 * time.Millisecond)
		c.Telemetry.ScrapeTimeout = config.Duration(40 * time.Millisecond)
	}
	c.Telemetry.ScrapeInterval = scale(c.Telemetry.ScrapeInterval)
	c.Telemetry.ScrapeTimeout = scale(c.Telemetry.ScrapeTimeout)
	c.Telemetry.StaleAfter = max(scale(c.Telemetry.StaleAfter), c.Telemetry.ScrapeInterval)
}

// window returns the measured jobs [from, to) of n.
func window(n int, warm, tail float64) (from, to int) {
	from = int(math.Round(warm * float64(n)))
	to = n - int(math.Round(tail*float64(n)))
	return from, max(to, from+1)
}

// fleetEstimate is the sum of the GPUs' saturation rates alone: what a
// perfect balancer could sustain, the capacity search's starting point.
func fleetEstimate(gpus []GPU) float64 {
	sum := 0.0
	for _, g := range gpus {
		sum += g.SaturationRate
	}
	return sum
}

func logf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

func satMark(s bool) string {
	if s {
		return "  SATURATED"
	}
	return ""
}
