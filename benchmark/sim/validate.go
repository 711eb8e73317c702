package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/compare"
	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
	"github.com/llm-router/llm-router/scoring/prefix"
)

// ReadCompare reads an llm-bench compare result (compare-NAME.json).
func ReadCompare(path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// envoyPolicies are the simulator's stand-ins for Envoy alone, uncapped,
// as Envoy has no cap: round_robin, and the emulation of LEAST_REQUEST
// (two random choices, each replica counting its own requests).
var envoyPolicies = map[string]struct{ strategy, note string }{
	"ROUND_ROBIN":   {scoring.RoundRobin, "round_robin, uncapped"},
	"LEAST_REQUEST": {emulate.LeastRequestP2C, "least_request_p2c, uncapped"},
}

// plannedSetup is one real setup at one load and how the simulator runs
// it: Run is the template of its runs (QPS and Seed are set per seed);
// Skip, when set, says why it is not run.
type plannedSetup struct {
	Real stats.Stats
	Run  Run
	Sim  string
	Skip string
}

// validationPlan is a compare result turned into simulator runs.
type validationPlan struct {
	Workload loadgen.WorkloadOptions
	Engine   Engine
	Setups   []plannedSetup
}

// planValidation maps a compare result to the simulator: the same fleet
// (profiles in order, caps, engine settings), the workload options that
// reproduce its jobs, and every setup of its Stats the simulator can run.
// It reads no file; Validate checks the workload and the fleet's KV
// against the result's.
func planValidation(rep *report.Report) (*validationPlan, error) {
	if rep.TimeScale <= 0 {
		return nil, fmt.Errorf("time_scale: must be > 0, got %g", rep.TimeScale)
	}
	if len(rep.Fleet) == 0 {
		return nil, errors.New("fleet: no GPU")
	}
	if rep.Measured[0] < 0 || rep.Measured[1] > rep.Requests || rep.Measured[0] >= rep.Measured[1] {
		return nil, fmt.Errorf("measured_window: %v is not within %d requests", rep.Measured, rep.Requests)
	}
	wo, err := workloadOptions(rep)
	if err != nil {
		return nil, err
	}
	eng, err := engineOf(rep.FleetKeys)
	if err != nil {
		return nil, err
	}
	p := &validationPlan{Workload: wo, Engine: eng}
	for _, st := range rep.Stats {
		p.Setups = append(p.Setups, planSetup(rep, eng, st))
	}
	return p, nil
}

// workloadOptions recovers the loadgen options from the result's workload
// description (loadgen.Workload.Name); Validate checks that the loaded
// workload describes itself the same way.
func workloadOptions(rep *report.Report) (loadgen.WorkloadOptions, error) {
	name := rep.Workload
	o := loadgen.WorkloadOptions{TracePath: rep.Trace, Kind: loadgen.KindTrace, MaxTokens: loadgen.MaxTokensBound}
	if !strings.HasPrefix(name, "trace lengths, ") {
		return o, fmt.Errorf("workload: %q: only the trace-lengths workload is reproduced", name)
	}
	switch {
	case strings.Contains(name, loadgen.ArrivalsPoisson+" arrivals"):
		o.Arrivals = loadgen.ArrivalsPoisson
	case strings.Contains(name, loadgen.ArrivalsTrace+" arrivals"):
		o.Arrivals = loadgen.ArrivalsTrace
	default:
		return o, fmt.Errorf("workload: %q names no arrival process", name)
	}
	if strings.Contains(name, "oracle") {
		o.MaxTokens = loadgen.MaxTokensOracle
	}
	if _, v, ok := strings.Cut(name, "every length scaled by "); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return o, fmt.Errorf("workload: %q: bad length scale", name)
		}
		o.TokenScale = f
	}
	return o, nil
}

// engineOf is gpusim's default engine with the fleet keys every GPU ran
// with. stream_summary changes how a stream is carried, not the engine's
// times; the simulator then records token times too, for the goodput's
// p99 gap.
func engineOf(keys map[string]any) (Engine, error) {
	g := gpusim.DefaultConfig()
	e := Engine{MaxNumSeqs: g.MaxNumSeqs, MaxBatchedTokens: g.MaxBatchedTokens, GPUMemUtil: g.GPUMemUtil}
	for k, v := range keys {
		if k == "stream_summary" {
			b, ok := v.(bool)
			if !ok {
				return e, fmt.Errorf("fleet_keys.%s: want true or false, got %v", k, v)
			}
			e.StreamSummary = b
			continue
		}
		f, ok := v.(float64)
		if !ok {
			return e, fmt.Errorf("fleet_keys.%s: want a number, got %v", k, v)
		}
		switch k {
		case "gpu_mem_util":
			e.GPUMemUtil = f
		case "max_num_seqs":
			e.MaxNumSeqs = int(f)
		case "max_batched_tokens":
			e.MaxBatchedTokens = int(f)
		default:
			return e, fmt.Errorf("fleet_keys.%s: the simulator does not model this key", k)
		}
	}
	return e, nil
}

// gpuClasses groups the fleet's GPUs, in order, into classes of equal
// profile and cap; capped false leaves every class uncapped.
func gpuClasses(gpus []fleet.GPU, s fleet.Setup, capped bool) []GPUClass {
	workers := fleet.Workers(gpus, s)
	var out []GPUClass
	for i, g := range gpus {
		c := 0
		if capped {
			c = workers[i].MaxConcurrency
		}
		if n := len(out); n > 0 && out[n-1].Profile == g.Profile && out[n-1].MaxConcurrency == c {
			out[n-1].Count++
			continue
		}
		out = append(out, GPUClass{Profile: g.Profile, Count: 1, MaxConcurrency: c})
	}
	return out
}

// planSetup is how the simulator runs the setup named by st.
func planSetup(rep *report.Report, eng Engine, st stats.Stats) plannedSetup {
	p := plannedSetup{Real: st}
	s, err := setupByName(st.Setup)
	if err != nil {
		p.Skip = err.Error()
		return p
	}
	s = legacyCaps(rep, s)
	strategy, capped := s.Strategy, s.Router() && s.Caps != "" && s.Caps != fleet.CapsNone
	p.Sim = s.Strategy
	if !s.Router() {
		e, ok := envoyPolicies[s.LBPolicy]
		if !ok {
			p.Skip = fmt.Sprintf("no stand-in for Envoy's %s", s.LBPolicy)
			return p
		}
		strategy, capped, p.Sim = e.strategy, false, e.note
		s = fleet.RouterSetup(strategy)
	} else if !capped {
		p.Sim += ", uncapped"
	}
	if len(s.Settings) > 0 {
		p.Sim += " " + strings.Join(s.Settings, " ")
	}
	cfg, err := compare.RouterConfig(s, rep.TimeScale)
	if err != nil {
		p.Skip = err.Error()
		return p
	}
	// The benchmark's router periods are wall time; the simulator's are
	// GPU time.
	gpu := func(d time.Duration) time.Duration { return time.Duration(float64(d) / rep.TimeScale) }
	// The rest of the router's config as compare sets it (settings, the
	// queue, objectives) in GPU time: at time scale 1 nothing is scaled
	// but the queue's timeouts, which compare leaves in wall time.
	gcfg, err := compare.RouterConfig(s, 1)
	if err != nil {
		p.Skip = err.Error()
		return p
	}
	t := cfg.Queue.Timeout
	gcfg.Queue.Timeout = config.Timeouts{
		Critical: config.Duration(gpu(t.Critical.D())), Standard: config.Duration(gpu(t.Standard.D())), Batch: config.Duration(gpu(t.Batch.D())),
	}
	p.Run = Run{
		GPUs: gpuClasses(rep.Fleet, s, capped), Engine: eng, Replicas: max(s.Replicas, 1), Strategy: strategy,
		Router: Router{
			RefreshInterval: gpu(cfg.RefreshInterval.D()),
			ScrapePeriod:    gpu(cfg.Telemetry.ScrapeInterval.D()),
			TelemetryStale:  gpu(cfg.Telemetry.StaleAfter.D()),
		},
		Config: &gcfg,
	}
	if p.Run.Replicas > 1 {
		p.Sim += fmt.Sprintf(", %d replicas", p.Run.Replicas)
	}
	return p
}

// setupByName parses a compare setup's name back into the setup
// (fleet.ParseSetups' syntax without the "envoy " or "router " label).
func setupByName(name string) (fleet.Setup, error) {
	spec, ok := strings.CutPrefix(name, "envoy ")
	if !ok {
		spec, ok = strings.CutPrefix(name, "router ")
	}
	if !ok {
		return fleet.Setup{}, fmt.Errorf("setup %q: neither envoy nor router", name)
	}
	ss, err := fleet.ParseSetups(spec)
	if err != nil {
		return fleet.Setup{}, err
	}
	if len(ss) != 1 || ss[0].Name != name {
		return fleet.Setup{}, fmt.Errorf("setup %q is not one setup's name", name)
	}
	return ss[0], nil
}

// runNonce stands for the prompt nonce each real run puts first
// (compare's "[run N-XXXXXX]"), so that block boundaries fall where
// they fell in the runs.
const runNonce = "[run 10-a1b2c3]"

// jobRequests are the jobs as simulator requests, with the block hashes
// the router and gpusim derive from the real request's text
// (loadgen.BlockHashes, with the run's nonce).
func jobRequests(jobs []loadgen.Job, blockTokens int) []Request {
	out := make([]Request, len(jobs))
	for i, j := range jobs {
		var h prefix.Hasher
		h.WriteString(`"user"`)
		h.WriteString(strconv.Quote(j.Request(runNonce, blockTokens).Content))
		out[i] = Request{
			Arrival: j.At, Prompt: j.Prompt, Output: j.Output, MaxTokens: j.MaxTokens,
			Blocks: append([]uint64(nil), h.Blocks()...),
		}
	}
	return out
}

// Validate runs the simulator on a compare result's fleet, workload,
// seeds and rates, setup by setup, and sets its figures beside the real
// ones. progress, when not nil, gets a line per run.
func Validate(rep *report.Report, source string, progress io.Writer) (*Validation, error) {
	start := time.Now()
	p, err := planValidation(rep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	w, err := loadgen.LoadWorkload(p.Workload)
	if err != nil {
		return nil, fmt.Errorf("%s: trace: %w", source, err)
	}
	// A missing trace file makes loadgen fall back to its synthetic
	// trace: refuse it, since the jobs would be other jobs.
	if w.Source != rep.Trace {
		return nil, fmt.Errorf("%s: trace: %s was not read (%s instead); run from the directory the result's trace path is relative to", source, rep.Trace, w.Source)
	}
	if w.Name() != rep.Workload {
		return nil, fmt.Errorf("%s: workload: the result's %q is reproduced as %q", source, rep.Workload, w.Name())
	}
	if err := checkFleet(rep.Fleet, p.Engine); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	v := newValidation(rep, source)
	reqs := map[string][]Request{} // by load and seed
	for _, ps := range p.Setups {
		c := SetupCheck{Setup: ps.Real.Setup, Load: ps.Real.Load, Sim: ps.Sim}
		switch {
		case ps.Skip != "":
			c.Verdict, c.Why = VerdictNotRun, ps.Skip
		case len(ps.Real.Seeds) == 0:
			c.Verdict, c.Why = VerdictNotRun, "no real figures (every seed overloaded)"
		default:
			runs := make([]*RunResult, 0, len(ps.Real.Seeds))
			for _, seed := range ps.Real.Seeds {
				rate, err := offeredRate(rep, ps.Real.Setup, ps.Real.Load, seed)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", source, err)
				}
				key := fmt.Sprint(ps.Real.Load, seed)
				if reqs[key] == nil {
					reqs[key] = jobRequests(w.Jobs(rep.Requests, rate, seed), w.BlockTokens())
				}
				run := ps.Run
				run.QPS, run.Seed = rate, seed
				t0 := time.Now()
				res, err := simulate(run, reqs[key])
				if err != nil {
					return nil, fmt.Errorf("%s: %s, seed %d: %w", source, ps.Real.Setup, seed, err)
				}
				if progress != nil {
					fmt.Fprintf(progress, "validate %s: %s seed %d at %.2f req/s: %d events in %.2fs\n",
						rep.Name, ps.Real.Setup, seed, rate, res.Events, time.Since(t0).Seconds())
				}
				runs = append(runs, res)
			}
			c = judge(c, ps.Real, runs, rep.Measured, rep.SLO)
			c.Served = served(rep, ps.Real, runs)
		}
		v.Setups = append(v.Setups, c)
	}
	v.Wall = time.Since(start)
	return v, nil
}

// offeredRate is the rate the real run of setup at load and seed offered.
func offeredRate(rep *report.Report, setup string, load float64, seed uint64) (float64, error) {
	for _, r := range rep.Runs {
		if r.Summary.Setup == setup && r.Summary.Load == load && r.Seed == seed {
			return r.Summary.Rate, nil
		}
	}
	return 0, fmt.Errorf("runs: no run of %s at load %g, seed %d", setup, load, seed)
}

// checkFleet refuses a fleet whose KV caches or prefill rates, as the
// router was configured with them, are not the simulator's engines'.
func checkFleet(gpus []fleet.GPU, eng Engine) error {
	_, specs, err := fleetSpecs(gpuClasses(gpus, fleet.Setup{}, false), eng, Disagg{})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for i, g := range gpus {
		s := specs[i]
		if s.KVBlocks != g.KVBlocks {
			return fmt.Errorf("fleet[%d] (%s): kv_blocks %d in the result, %d in the simulator's engine", i, g.ID, g.KVBlocks, s.KVBlocks)
		}
		if math.Abs(s.PrefillTokensPerSecond-g.PrefillRate) > 1e-6*g.PrefillRate {
			return fmt.Errorf("fleet[%d] (%s): prefill_tokens_per_second %g in the result, %g in the simulator", i, g.ID, g.PrefillRate, s.PrefillTokensPerSecond)
		}
	}
	return nil
}

// poolSim pools the simulator's runs of one setup as compare pools the
// real ones: the measured window of every seed, bootstrapped together,
// and the hit rate per seed over the whole run.
func poolSim(runs []*RunResult, measured [2]int, slo stats.SLO) (st stats.Stats, refused, tooLong int) {
	strata := make([][]loadgen.Result, len(runs))
	var hits []float64
	for i, r := range runs {
		strata[i] = asResults(r.Requests)[measured[0]:measured[1]]
		// Goodput's inter-token bound is on each request's own p99 gap,
		// as compare's client measures it, not on its mean (asResults'
		// TPOT, left where the engines recorded no token times).
		for k, q := range r.Requests[measured[0]:measured[1]] {
			if q.Outcome == OutcomeOK && q.ITLP99 > 0 {
				strata[i][k].ITLs = []time.Duration{q.ITLP99}
			}
		}
		h := 0.0
		if r.PrefixQueries > 0 {
			h = float64(r.PrefixHits) / float64(r.PrefixQueries)
		}
		hits = append(hits, h)
		for _, q := range r.Requests {
			switch q.Outcome {
			case OutcomeRefused:
				refused++
			case OutcomeTooLong:
				tooLong++
			}
		}
	}
	st = stats.Bootstrap(strata, slo, rand.New(rand.NewPCG(7, 11)))
	st.HitRate = stats.Estimate{Seeds: hits, Lo: hits[0], Hi: hits[0]}
	for _, h := range hits {
		st.HitRate.Value += h / float64(len(hits))
		st.HitRate.Lo, st.HitRate.Hi = min(st.HitRate.Lo, h), max(st.HitRate.Hi, h)
	}
	return st, refused, tooLong
}

// served counts each GPU's measured requests over the seeds, in the real
// runs (their summaries) and the simulator's.
func served(rep *report.Report, real stats.Stats, runs []*RunResult) []Served {
	out := make([]Served, len(rep.Fleet))
	for i, g := range rep.Fleet {
		out[i].GPU = g.ID
		for _, r := range rep.Runs {
			if r.Summary.Setup == real.Setup && r.Summary.Load == real.Load && slices.Contains(real.Seeds, r.Seed) {
				out[i].Real += r.Summary.PerWorker[g.ID]
			}
		}
	}
	for _, r := range runs {
		for _, q := range r.Requests[rep.Measured[0]:rep.Measured[1]] {
			if q.Outcome == OutcomeOK {
				out[q.GPU].Sim++
			}
		}
	}
	return out
}

// capsNamed is when router setups became uncapped unless their name says
// caps=: results started before it ran every router strategy but the
// peers' emulations with the SLO-sized caps, and their setup names do not
// say so.
var capsNamed = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

// legacyCaps is s with the caps its run had, for results written before
// caps were named.
func legacyCaps(rep *report.Report, s fleet.Setup) fleet.Setup {
	if rep.Started.Before(capsNamed) && s.Router() && !s.Emulation() && s.Caps == "" {
		s.Caps = fleet.CapsSLOSized
	}
	return s
}
