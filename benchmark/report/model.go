package report

import (
	"fmt"
	"math"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
)

// Report is everything one comparison measured.
type Report struct {
	Name     string      `json:"name"`
	Command  string      `json:"command"`
	Machine  string      `json:"machine"`
	Started  time.Time   `json:"started"`
	WallTime float64     `json:"wall_seconds"`
	Workload string      `json:"workload"`
	Trace    string      `json:"trace"`
	Fleet    []fleet.GPU `json:"fleet"`
	// CapITL is the inter-token bound the caps were sized against (0:
	// none); each GPU says how (fleet.GPU.CapLoad, fleet.GPU.CapHeld).
	CapITL time.Duration `json:"cap_itl"`
	// FleetKeys are the gpusim fleet-file keys every GPU ran with.
	FleetKeys map[string]any `json:"fleet_keys,omitempty"`
	TimeScale float64        `json:"time_scale"`
	SLO       stats.SLO      `json:"slo"`
	Requests  int            `json:"requests_per_run"`
	Measured  [2]int         `json:"measured_window"` // job indexes [from, to)
	Seeds     []uint64       `json:"seeds"`
	Capacity  Capacity       `json:"capacity"`
	// SeedCapacity is each seed's capacity: the measured one scaled by
	// the seed's virtual-time fleet estimate over the first seed's.
	SeedCapacity map[uint64]float64 `json:"seed_capacity"`
	Loads        []float64          `json:"loads"`
	Runs         []*Run             `json:"runs"`
	// Stats are the pooled figures with intervals, per load and setup.
	Stats []stats.Stats `json:"stats"`
	// Ceilings are the prefix hit rates the workload allows (traces with
	// prefix ids only).
	Ceilings *Ceilings `json:"prefix_ceilings,omitempty"`
	Aims     []Aim     `json:"aims"`
	// Overload lists the (load, seed) pairs at which no configuration
	// kept up with the offered rate (compare's overloaded): named, and
	// left out of Stats.
	Overload []string `json:"overload,omitempty"`
	// Void lists the void runs (saturated capacity probes, then every
	// comparison run with a Run.Void reason), each with why.
	Void []string `json:"void,omitempty"`
	// Budget is the machine's CPU budget against the busiest run, judged
	// before the runs (compare's machineBudget).
	Budget *Budget `json:"machine_budget,omitempty"`
	// Degraded lists the runs that did not schedule the whole fleet
	// (compare's degradedRouting), with why: they count in the tables,
	// named.
	Degraded []string `json:"degraded,omitempty"`
	// HostRef is the host-speed probe's time before the first run, µs.
	HostRef float64  `json:"host_probe_us"`
	Notes   []string `json:"notes"`
	// PlotNotes says, by plot file, why a plot has no data (WritePlots).
	PlotNotes map[string]string `json:"-"`
}

// Run is one setup under one load: the summary, the raw results and what
// the machine did meanwhile.
type Run struct {
	Summary stats.Summary `json:"summary"`
	// Seed is the workload's seed.
	Seed uint64 `json:"seed"`
	// HitRate is the fleet's prefix-cache hit rate over the run (every
	// request, measured or not), tokens: hits / queries of gpusim's
	// counters.
	HitRate float64 `json:"prefix_hit_rate"`
	// CPU is each of our processes' CPU over the run and Cores their
	// total; MachineCores is the whole machine's busy cores (every process,
	// ours or not) out of MachineCPUs.
	CPU          []host.CPUUse `json:"cpu"`
	Cores        float64       `json:"cores"`
	MachineCores float64       `json:"machine_busy_cores"`
	MachineCPUs  int           `json:"machine_cpus"`
	Saturated    bool          `json:"saturated"`
	SenderLagMs  float64       `json:"sender_lag_ms"`
	// HostSlowdown is the host-speed probe's time during the run over its
	// time before the first run (host.Probe): 1 is as fast, 1.2 a fifth
	// slower; 0 when not measured. HostAttempts lists every attempt's
	// slowdown when the run was repeated on a slow host (compare's runSteady).
	HostSlowdown float64   `json:"host_slowdown"`
	HostAttempts []float64 `json:"host_attempts,omitempty"`
	WallSeconds  float64   `json:"wall_seconds"`
	// Void lists why the run's figures may not be the configuration's
	// (VoidReasons), each with its figure; empty when valid.
	Void []string `json:"void,omitempty"`
	// Inflight samples each GPU's running and waiting requests.
	Inflight []fleet.InflightSample `json:"inflight,omitempty"`
	// Results are every job's result in GPU time, measured or not (not in
	// the JSON: the requests CSV has them).
	Results []loadgen.Result `json:"-"`
}

// HostSlow reports whether the host was slower than host.SlowLimit during
// the run.
func (r *Run) HostSlow() bool { return r.HostSlowdown > host.SlowLimit }

// Capacity is the fleet's capacity as measured in the run.
type Capacity struct {
	// Setup is the configuration probed.
	Setup string `json:"setup"`
	// Rate is the capacity, req/s of GPU time.
	Rate float64 `json:"rate"`
	// Estimate is the sum of the GPUs' saturation rates alone (virtual
	// time): the search's starting point, and what perfect balancing
	// would sustain.
	Estimate float64 `json:"estimate"`
	// BoundMs is the median TTFT a sustainable rate stays under.
	BoundMs  float64 `json:"median_ttft_bound_ms"`
	Requests int     `json:"probe_requests"`
	Probes   []Probe `json:"probes"`
	// Void lists the probes the machine voided, for the report's Void.
	Void []string `json:"-"`
}

// Probe is one trial rate of the capacity search.
type Probe struct {
	Rate        float64 `json:"rate"`
	TTFTP50     float64 `json:"ttft_p50_ms"`
	Sustainable bool    `json:"sustainable"`
	Saturated   bool    `json:"machine_saturated"`
	Run         *Run    `json:"-"`
}

// Ceilings are the prefix hit rates a workload allows, in tokens, as
// gpusim counts them (hits / prompt tokens, at most (prompt-1)/16 blocks a
// request).
type Ceilings struct {
	// Trace is the ceiling over the whole trace with an unbounded cache
	// (every repeated block a hit): the trace's own figure.
	Trace float64 `json:"trace_unbounded"`
	// Unbounded is the same over each seed's run (its window of the trace:
	// earlier turns of its conversations may fall before it), per seed.
	Unbounded map[uint64]float64 `json:"run_unbounded"`
	// Fleet is what the fleet's real KV capacity allows, as the benchmark
	// issue defines it: an offline replay of each seed's run that sends
	// every request to the GPU holding most of its prefix (ties to the GPU
	// with fewest requests so far), ignoring load, each GPU's cache its
	// profile's KV blocks, evicting least recently used.
	Fleet map[uint64]float64 `json:"run_fleet_kv"`
	// Pooled is the same replay with one LRU cache as large as the whole
	// fleet's KV: what a placement that never duplicated a block and never
	// left a GPU's cache idle would keep. It is the practical reference;
	// the greedy Fleet replay is not one: piling every request that shares
	// a popular prefix onto one GPU thrashes that GPU's cache while the
	// others hold little, and on the Mooncake trace round robin beats it.
	// (Neither is a strict bound: LRU is not the optimal eviction.)
	Pooled map[uint64]float64 `json:"run_fleet_kv_pooled"`
}

// Aim is one of the benchmark's targets: a figure of the router's default
// strategy, usually a ratio to a peer's, with its 95 % interval, and the
// verdict the interval gives.
type Aim struct {
	Name   string         `json:"name"`
	Load   float64        `json:"load"`
	Ratio  stats.Estimate `json:"ratio"`
	Target string         `json:"target"`
	// Verdict is "met" when the whole interval is on the target's side,
	// "missed" when the whole interval is on the other side, "not
	// settled" when it straddles the target, and NotJudged when a setup
	// the aim needs has no figures at its load.
	Verdict string `json:"verdict"`
	// Judges names the interval the verdict reads.
	Judges string `json:"judged_by"`
	// Detail gives the values compared.
	Detail string `json:"detail"`
}

// NotJudged is the verdict of an aim a setup it needs has no figures for.
const NotJudged = "not judged"

// EstimateSetup names the capacity when it is the fleet estimate.
const EstimateSetup = "fleet estimate (virtual time)"

// ClosestLoad is the load of loads closest to want; false when there is
// none.
func ClosestLoad(loads []float64, want float64) (float64, bool) {
	best, ok := 0.0, false
	for _, l := range loads {
		if !ok || math.Abs(l-want) < math.Abs(best-want) {
			best, ok = l, true
		}
	}
	return best, ok
}

// FmtEst renders "v [lo, hi]"; unit "ms" rounds to ms, "%" shows percent.
func FmtEst(e stats.Estimate, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.0f [%.0f, %.0f] ms", e.Value, e.Lo, e.Hi)
	case "%":
		return fmt.Sprintf("%.2f%% [%.2f, %.2f]", 100*e.Value, 100*e.Lo, 100*e.Hi)
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", e.Value, e.Lo, e.Hi)
}

// OverloadKey names a (load, seed) pair, as Report.Overload lists them.
func OverloadKey(load float64, seed uint64) string {
	return fmt.Sprintf("%.0f%% seed %d", 100*load, seed)
}

// The rules below are applied by benchmark/compare and stated in the
// report; they live here so that both read the one value.

// CapLoad is the share of a GPU's saturation rate at which its cap is
// sized, unless the inter-token SLO needs a lower one (CapLoadStep,
// CapLoadMin); CapGoodShare is the share of requests that must meet it.
const (
	CapLoad      = 0.9
	CapLoadStep  = 0.05
	CapLoadMin   = 0.3
	CapGoodShare = 0.99
)

// SaturationShare is the share of the machine's cores busy (with anything)
// above which a run is void: the proxies or the clients may have waited for
// a core, so differences between setups could be the machine's.
const SaturationShare = 0.85

// SizingSeed draws the jobs that size the fleet: one fixed sample, so
// every seed and configuration meets the same fleet and the same caps.
const SizingSeed = 0

// DefaultSetup is the router's default strategy, the one the aims judge.
var DefaultSetup = "router " + config.Default().Strategy
