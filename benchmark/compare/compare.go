package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
	"github.com/llm-router/llm-router/test/stack"
)

// Options configure Compare.
type Options struct {
	BinDir string
	// Name is the comparison's short name (e.g. the trace's): its files are
	// compare-<Name>.json, report-<Name>.md and so on.
	Name     string
	Fleet    string // fleet.Parse syntax
	Workload loadgen.WorkloadOptions
	// FleetExtra are gpusim fleet-file keys given to every GPU (e.g.
	// gpu_mem_util, max_batched_tokens).
	FleetExtra map[string]any
	// TimeScale is the fleet's slowdown: every simulated duration is
	// multiplied by it and every measured one divided by it, so results are
	// in GPU time whatever the machine needed.
	TimeScale float64
	Setups    []fleet.Setup
	// Aims is the aim set the report judges (AimsConversation,
	// AimsMooncake, AimsReuse); empty: none.
	Aims     string
	Loads    []float64 // shares of the measured capacity
	Requests int       // jobs per run
	// Warmup and Tail are the shares of each run's jobs before and after
	// the measured window: the first load an idle fleet and warm the
	// router's averages, the last keep the load steady until the measured
	// ones end.
	Warmup, Tail float64
	// Seeds are the workloads compared: each seed draws its own window of
	// the trace and its own arrivals, and every setup runs every seed.
	Seeds []uint64
	SLO   stats.SLO
	// Capacity, when positive, is used instead of measuring it.
	Capacity float64
	// ProbeCapacity measures the capacity through real runs of
	// CapacitySetup (a search over rates on the first seed) and scales it
	// to the other seeds. Off, each seed's capacity is its virtual-time
	// fleet estimate: deterministic, so repeated comparisons offer the same
	// rates (a probe search lands a step lower or higher from run to run,
	// and capped strategies' queueing moves a lot with a 7 % change of load
	// near capacity).
	ProbeCapacity bool
	CapacitySetup fleet.Setup
	// CapacityTTFT is the median TTFT a sustainable rate stays under.
	CapacityTTFT  time.Duration
	ProbeRequests int
	MaxProbes     int
	// SizingRequests is the length of the virtual-time replays that size
	// each GPU (SizeFleet).
	SizingRequests int
	// CapsForThroughput sizes every cap at report.CapLoad, ignoring the SLO's
	// inter-token bound; CapsAtMean takes the mean held where the SLO does
	// not bound a GPU, not the 99th percentile. Both at once is the rule
	// before 2026-12-01 (SizeFleet).
	CapsForThroughput, CapsAtMean bool
	// Grace bounds the wait (GPU time) for a run's measured requests after
	// its last arrival; what is still running then is cut, and the run is
	// reported as overloaded.
	Grace        time.Duration
	SamplePeriod time.Duration
	ResultsDir   string
	Command      string
	Progress     io.Writer // progress bars
	Log          io.Writer // one line per run
}

// DefaultSetups are the configurations of the long comparison: Envoy
// alone with its two usual policies, the router with every strategy, and
// the GIE emulation with prefix scoring again with three replicas, each
// with its own index, as that scheduler would run active-active.
//
// Every router setup runs with caps an operator could set without
// replaying the trace: none (max_concurrency 0), or, for a strategy whose
// plan has no load term (needsCap), the engine's batch limit.
//
// The default strategy runs three ways besides: with the offline
// SLO-sized caps (caps=slo-sized, a labelled variant: no operator has
// them), with three replicas sharing one Redis (its prefix index is
// shared, so its hit rate should not fall); and scored with its prefix
// and token-load weights at 0 (the formula before those terms), to show
// what they change.
func DefaultSetups() []fleet.Setup {
	out := []fleet.Setup{fleet.EnvoySetup("ROUND_ROBIN"), fleet.EnvoySetup("LEAST_REQUEST")}
	def := config.Default().Strategy
	for _, s := range config.Strategies() {
		if slices.Contains(emulate.SimulatorOnly(), s) {
			continue // fed by the simulator alone (KV events, LoRA figures)
		}
		out = append(out, routerSetup(s))
		if s == emulate.PrefixQueueKVMaxScore {
			out = append(out, fleet.RouterReplicasSetup(s, 3))
		}
		if s == def {
			out = append(out, fleet.RouterSetup(s).WithCaps(fleet.CapsSLOSized), fleet.RouterReplicasSetup(s, 3))
		}
		if s == scoring.Scored {
			out = append(out, fleet.VariantSetup(s, 1, "scoring.weights.prefix=0", "scoring.weights.token_load=0"))
		}
	}
	return out
}

// ShortSetups are the short comparison's configurations (`make bench`),
// fewer so that three presets at three loads and three seeds fit about 25
// minutes on two cores: Envoy LEAST_REQUEST (the baseline), the default
// strategy uncapped and with the SLO-sized caps, scored when it is not the
// default (the strategy before), and every peer emulation, the GIE prefix
// one also as three replicas.
func ShortSetups() []fleet.Setup {
	def := config.Default().Strategy
	out := []fleet.Setup{fleet.EnvoySetup("LEAST_REQUEST"), fleet.RouterSetup(def), fleet.RouterSetup(def).WithCaps(fleet.CapsSLOSized)}
	if def != scoring.Scored {
		out = append(out, fleet.RouterSetup(scoring.Scored))
	}
	for _, s := range emulate.Names() {
		out = append(out, fleet.RouterSetup(s))
		if s == emulate.PrefixQueueKVMaxScore {
			out = append(out, fleet.RouterReplicasSetup(s, 3))
		}
	}
	return out
}

// needsCap are the strategies whose plan has no load term: uncapped, each
// would send every request to the worker that looks best, so they run
// with the engine's batch limit.
var needsCap = []string{scoring.LatencyBased}

// routerSetup is the router with strategy s and the caps it needs.
func routerSetup(s string) fleet.Setup {
	if slices.Contains(needsCap, s) {
		return fleet.RouterSetup(s).WithCaps(fleet.CapsBatchLimit)
	}
	return fleet.RouterSetup(s)
}

// DefaultOptions is the long comparison on the Azure conversation
// trace.
func DefaultOptions() Options {
	return Options{
		BinDir: "bin", Name: "azure-conv", Fleet: fleet.Default, TimeScale: 1,
		Workload: loadgen.WorkloadOptions{TracePath: "benchmark/traces/azure-conv-2023.csv", Kind: loadgen.KindTrace, Arrivals: loadgen.ArrivalsPoisson, LongShare: 0.25},
		Setups:   DefaultSetups(), Aims: AimsConversation, Loads: []float64{0.6, 0.8, 0.95},
		Requests: 1300, Warmup: 0.1, Tail: 0.1, Seeds: []uint64{1, 2, 3}, SLO: stats.DefaultSLO(),
		CapacitySetup: fleet.EnvoySetup("LEAST_REQUEST"), CapacityTTFT: 500 * time.Millisecond, ProbeRequests: 2000, MaxProbes: 6, SizingRequests: 2000,
		Grace: 10 * time.Minute, SamplePeriod: 250 * time.Millisecond, ResultsDir: "benchmark/results",
	}
}

// Compare runs every setup at every load and seed on one fleet and one
// workload.
func Compare(ctx context.Context, o Options) (*report.Report, error) {
	started := time.Now()
	if o.TimeScale <= 0 || o.Requests < 20 || o.Warmup < 0 || o.Tail < 0 || o.Warmup+o.Tail >= 0.9 || len(o.Seeds) == 0 {
		return nil, errors.New("compare: need time scale > 0, at least 20 requests, warm-up + tail < 0.9, a seed")
	}
	w, err := loadgen.LoadWorkload(o.Workload)
	if err != nil {
		return nil, err
	}
	gpus, err := fleet.Parse(o.Fleet)
	if err != nil {
		return nil, err
	}
	logf(o.Log, "sizing the fleet on %s (virtual time)", w.Source)
	rule := CapRule{ITL: o.SLO.ITL, Mean: o.CapsAtMean}
	if o.CapsForThroughput {
		rule.ITL = 0
	}
	if err := SizeFleet(gpus, simRequests(w, w.Jobs(o.SizingRequests, 1, report.SizingSeed)), o.FleetExtra, rule); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "llmr-compare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := fleet.NewEnv(o.BinDir, dir)
	if err != nil {
		return nil, err
	}
	extra := map[string]any{"stream_summary": true}
	for k, v := range o.FleetExtra {
		extra[k] = v
	}
	sim, err := fleet.Start(ctx, o.BinDir, dir, gpus, o.TimeScale, extra)
	if err != nil {
		return nil, err
	}
	defer sim.Stop(5 * time.Second)
	for _, g := range gpus {
		logf(o.Log, "  %-8s %-16s %s  alone: %.2f req/s  cap %d", g.ID, g.Profile, g.Addr, g.SaturationRate, g.Cap)
	}
	r := &runner{
		env: e, fleet: sim, gpus: gpus, scale: o.TimeScale, slo: o.SLO, progress: o.Progress,
		sample: o.SamplePeriod, grace: time.Duration(float64(o.Grace) * o.TimeScale), blockTokens: w.BlockTokens(),
		workers: func(s fleet.Setup) []config.Worker { return fleet.Workers(gpus, s) },
		mutate:  func(s fleet.Setup, c *config.Config) { benchRouterConfig(s, c, o.TimeScale) },
	}
	if slices.ContainsFunc(o.Setups, func(s fleet.Setup) bool { return s.Replicas > 1 }) {
		redis, err := stack.StartRedis(ctx, dir, "")
		if err != nil {
			return nil, err
		}
		defer redis.Stop(2 * time.Second)
		r.redisAddr = redis.Addr
	}
	rep := &report.Report{
		Name: o.Name, Command: o.Command, Machine: host.Machine(), Started: started, Workload: w.Name(), Trace: w.Source,
		Fleet: gpus, CapITL: rule.ITL, FleetKeys: extra, TimeScale: o.TimeScale, SLO: o.SLO, Requests: o.Requests, Loads: o.Loads, Seeds: o.Seeds,
	}
	from, to := window(o.Requests, o.Warmup, o.Tail)
	rep.Measured = [2]int{from, to}

	co := o
	co.Seeds = o.Seeds[:1]
	switch {
	case o.Capacity > 0:
		rep.Capacity = report.Capacity{Setup: "given (--capacity)", Rate: o.Capacity, Estimate: fleetEstimate(gpus)}
	case o.ProbeCapacity:
		rep.Capacity, err = measureCapacity(ctx, r, w, co)
		if err != nil {
			return nil, err
		}
		rep.Void = append(rep.Void, rep.Capacity.Void...)
	}
	if rep.SeedCapacity, err = seedCapacities(w, gpus, o, rep.Capacity.Rate); err != nil {
		return nil, err
	}
	if rep.Capacity.Rate == 0 {
		rep.Capacity = report.Capacity{Setup: report.EstimateSetup, Rate: rep.SeedCapacity[o.Seeds[0]], Estimate: rep.SeedCapacity[o.Seeds[0]]}
	}
	// The median TTFT bound of a sustainable probe is also the one a run
	// keeps within to have kept up (overloaded).
	rep.Capacity.BoundMs = stats.Ms(o.CapacityTTFT)
	logf(o.Log, "capacity: %.2f req/s (%s, seed %d)", rep.Capacity.Rate, rep.Capacity.Setup, o.Seeds[0])
	if w.Prefixed() {
		rep.Ceilings = prefixCeilings(w, gpus, o)
	}

	// The host's speed before the first run, the fleet idle: each run's
	// probe is compared with it (host.Probe). The machine's busy cores
	// meanwhile are what other work leaves the runs (machineBudget).
	idle := host.NewMachineMeter()
	idle.Start()
	r.hostRef = host.Calibrate(host.Calibration)
	idleBusy := max(idle.Stop(), 0) * float64(runtime.NumCPU())
	r.repeats = host.RepeatBudget
	rep.HostRef = float64(r.hostRef) / float64(time.Microsecond)
	logf(o.Log, "host probe: %.0f µs before the first run; %.2f cores busy", rep.HostRef, idleBusy)
	rep.Budget = machineBudget(o, rep.SeedCapacity, idleBusy)
	if warn := rep.Budget.Warning(o.TimeScale); warn != "" {
		logf(o.Log, "warning: %s", warn)
	}
	for _, load := range o.Loads {
		for _, seed := range o.Seeds {
			rate := load * rep.SeedCapacity[seed]
			jobs := w.Jobs(o.Requests, rate, seed)
			for _, s := range o.Setups {
				label := fmt.Sprintf("%3.0f%% seed %d %s", 100*load, seed, s.Name)
				run, err := r.runSteady(ctx, s, jobs, from, to, label, o.Log)
				if err != nil {
					return nil, err
				}
				run.Seed = seed
				run.Summary.Load, run.Summary.Rate = load, rate
				rep.Runs = append(rep.Runs, run)
				sm := run.Summary
				logf(o.Log, "%-48s %4.0fs  ttft p50 %7.0f p99 %7.0f ms  good %5.1f%%  err %d  hit %4.1f%%  cpu %.2f cores (machine %.2f/%d)  host %.2fx%s",
					label, run.WallSeconds, sm.TTFTP50, sm.TTFTP99, 100*sm.GoodFraction, sm.Errors, 100*run.HitRate, run.Cores, run.MachineCores, run.MachineCPUs, run.HostSlowdown, voidMark(run.VoidReasons(nil)))
				if why := degradedRouting(sm, fleet.IDs(r.gpus)); why != "" {
					rep.Degraded = append(rep.Degraded, label+" ("+why+")")
					logf(o.Log, "%-48s degraded routing: %s", label, why)
				}
			}
		}
	}
	rep.Overload = overloaded(rep.Runs, o)
	rep.MarkVoid()
	rep.Stats = pooledStats(rep.Runs, rep.Measured, o, rep.Overload)
	rep.Aims = computeAims(rep, o.Aims)
	rep.Notes = compareNotes(o, w)
	if warn := rep.Budget.Warning(o.TimeScale); warn != "" {
		rep.Notes = append([]string{"Before the runs: " + warn + "."}, rep.Notes...)
	}
	rep.WallTime = time.Since(started).Seconds()
	reportPath := ""
	if o.ResultsDir != "" {
		if err := report.Write(o.ResultsDir, rep); err != nil {
			return rep, err
		}
		reportPath = filepath.Join(o.ResultsDir, "latest", "report-"+rep.Name+".md")
	}
	return rep, rep.VoidError(reportPath)
}

// minScrape is the shortest scrape interval the router accepts.
const minScrape = config.Duration(10 * time.Millisecond)

// benchRouterConfig adjusts the router's config for the benchmark:
//   - the queue holds every burst (Envoy alone queues without limit at the
//     GPUs, so a router that shed load would win on latency by refusing
//     work) and waits up to 10 minutes;
//   - decision logs off (warn level): they are the router's biggest CPU
//     cost on two shared cores, and no table reads them;
//   - every period that bounds how fresh the router's knowledge of the GPUs
//     is, and every request objective, is timeScale times the GPU time, as
//     the GPUs run;
//   - the Gateway API Inference Extension's emulations scrape every 50 ms
//     of GPU time, as it does (its default metrics refresh;
//     fleet.Setup.FastScrape).
func benchRouterConfig(s fleet.Setup, c *config.Config, timeScale float64) {
	c.LogLevel = "warn"
	c.Queue.MaxQueueSize = 100000
	c.Queue.Timeout = config.Timeouts{
		Critical: config.Duration(10 * time.Minute), Standard: config.Duration(10 * time.Minute), Batch: config.Duration(10 * time.Minute),
	}
	scale := func(d config.Duration) config.Duration { return config.Duration(float64(d) * timeScale) }
	c.RefreshInterval = scale(c.RefreshInterval)
	// The request objectives are GPU time, and the router measures and
	// predicts TTFT and TPOT in wall time.
	c.SLO.TTFT, c.SLO.TPOT = scale(c.SLO.TTFT), scale(c.SLO.TPOT)
	c.SLO.MinTTFT, c.SLO.MinTPOT = scale(c.SLO.MinTTFT), scale(c.SLO.MinTPOT)
	c.InferenceAware.Staleness = scale(c.InferenceAware.Staleness)
	// The engines' inter-token histograms are in wall time with buckets
	// scaled alike (gpusim), so an SLO in GPU time is scaled too.
	c.AdaptiveCaps.ITLSLO = scale(c.AdaptiveCaps.ITLSLO)
	if s.FastScrape() {
		c.Telemetry.ScrapeInterval = config.Duration(50 * time.Millisecond)
		c.Telemetry.ScrapeTimeout = config.Duration(40 * time.Millisecond)
	}
	// The router scrapes at most every 10 ms (its config's floor): at time
	// scales below 0.2 the 50 ms of GPU time become 10 ms of wall time, a
	// little staler in GPU time than the emulated scheduler's.
	c.Telemetry.ScrapeInterval = max(scale(c.Telemetry.ScrapeInterval), minScrape)
	c.Telemetry.ScrapeTimeout = min(scale(c.Telemetry.ScrapeTimeout), c.Telemetry.ScrapeInterval)
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
func fleetEstimate(gpus []fleet.GPU) float64 {
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

// voidMark is the log's mark of a run void for reasons.
func voidMark(reasons []string) string {
	if len(reasons) == 0 {
		return ""
	}
	return "  VOID: " + strings.Join(reasons, ", ")
}

func satMark(s bool) string {
	if s {
		return "  SATURATED"
	}
	return ""
}

// Presets are the comparisons `make bench` runs, by name: the trace, the
// fleet that serves it and the scales that fit the run to a 2-core host.
var presets = map[string]func(o *Options, short bool){
	// The Azure conversation trace (no prefix ids): the heterogeneous
	// fleet, real lengths.
	"azure-conv": func(o *Options, short bool) {
		o.Workload.TracePath = "benchmark/traces/azure-conv-2023.csv"
		o.Fleet = fleet.Default
		o.Aims = AimsConversation
		if short {
			o.TimeScale = 0.15
		}
	},
	// The Mooncake conversation trace (prefix ids): see mooncakeFleet.
	"mooncake-conv": func(o *Options, short bool) {
		o.Workload.TracePath = "benchmark/traces/mooncake-conversation.jsonl"
		o.Fleet = mooncakeFleet
		o.Workload.TokenScale = mooncakeTokenScale
		o.FleetExtra = map[string]any{"gpu_mem_util": mooncakeMemUtil}
		o.Aims = AimsMooncake
		if short {
			o.TimeScale = 0.15
		}
	},
	// The same trace with each GPU's whole KV cache (gpusim's default
	// gpu_mem_util, 0.9), 8 times the scaled trace's: the fleet holds the
	// working set of a run, so the hit rate a placement reaches is its
	// own, not the cache's (multi-turn chat with high reuse).
	"mooncake-reuse": func(o *Options, short bool) {
		o.Workload.TracePath = "benchmark/traces/mooncake-conversation.jsonl"
		o.Fleet = mooncakeFleet
		o.Workload.TokenScale = mooncakeTokenScale
		o.FleetExtra = nil
		o.Aims = AimsReuse
		if short {
			o.TimeScale = 0.15
		}
	},
}

// The Mooncake comparison's fleet and scale. Its prompts average 12,000
// tokens (p99 85,000), so the fleet is A100s serving Llama-3-8B, whose
// grouped-query attention keeps 400,000 tokens of KV in 80 GB. At full
// length one run of 1,150 requests would take over an hour of GPU time;
// every length is scaled by 1/8 (a hash id is 64 tokens of text instead of
// 512), and each GPU's KV cache is cut to 1/8 too (gpu_mem_util 0.33 leaves
// 6.6 GB of KV after the 16 GB of weights and 4 GB of reserve), so a cache
// holds as many requests' prefixes as the real one would: the reuse
// structure and the cache pressure are the trace's, the times are shorter.
const (
	mooncakeFleet      = "a100-llama3-8b:4"
	mooncakeTokenScale = 0.125
	mooncakeMemUtil    = 0.33
)

// PresetNames lists the presets.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ApplyPreset sets o's name, trace, fleet and scales from the named preset.
func ApplyPreset(o *Options, name string, short bool) error {
	p, ok := presets[name]
	if !ok {
		return fmt.Errorf("comparison %q: want one of %v", name, PresetNames())
	}
	o.Name = name
	p(o, short)
	return nil
}
