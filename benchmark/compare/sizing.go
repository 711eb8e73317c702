package compare

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// CapRule is how SizeFleet sizes caps.
type CapRule struct {
	// ITL is the inter-token SLO the caps fit; 0: none (every GPU sized
	// at report.CapLoad).
	ITL time.Duration
	// Mean takes the mean number of requests held (Little's law) where
	// the SLO does not bound the GPU, instead of the 99th percentile.
	Mean bool
}

// DefaultCapRule fits the default SLO, with room for bursts.
func DefaultCapRule() CapRule { return CapRule{ITL: stats.DefaultSLO().ITL} }

// SizeFleet fills each GPU's saturation rate and SLO-sized cap from a
// virtual-time replay of jobs on its profile (gpusim's engine, no
// processes), and what an operator knows of it without any replay: its KV
// blocks, prefill rate and engine batch limit. The
// saturation rate is the highest rate at which the GPU alone keeps the
// median TTFT under 2 s (gpusim.FindSaturation). The cap (the router's
// max_concurrency) follows rule:
//
//   - a GPU whose requests meet the inter-token SLO (rule.ITL) at
//     report.CapLoad (90 %) of its saturation rate gets the 99th
//     percentile, weighted by time, of the requests it holds there: room
//     for bursts. Their mean
//     there (Little's law, rate × mean end-to-end latency; rule.Mean) is
//     what the rule took until 2026-12-01: a cap at the mean binds
//     whenever arrivals bunch up, and on the Azure trace it held requests
//     in the router's queue at 80 % load on the busiest seed and at 95 %
//     on every seed while the GPUs had room (docs/benchmark.md).
//   - a GPU that reaches 90 % only by breaking the SLO (a slow GPU's
//     steps that carry a prefill chunk beside a full decode batch take
//     longer than the SLO allows) is sized at a lower load, lowered in
//     steps of 5 points (no lower than 30 %) until at least 99 % of its
//     requests (the goodput aim) keep their own p99 gap within the SLO,
//     and its cap is the mean number it holds there, not a percentile:
//     under a backlog the router holds a GPU at its cap, and the replay
//     met the SLO at that mean.
//
// This is how an operator sizes max_concurrency against an SLO from a load
// test of one GPU; it reads the GPU alone, never a comparison. The result
// depends only on the profile and the workload, so GPUs of one profile
// share it.
func SizeFleet(gpus []fleet.GPU, reqs []gpusim.SimRequest, extra map[string]any, rule CapRule) error {
	type sized struct {
		rate, prefill, load float64
		cap, kv, batch      int
		held                string
	}
	done := map[string]sized{}
	for i := range gpus {
		s, ok := done[gpus[i].Profile]
		if !ok {
			cfg, err := sizingConfig(gpus[i].Profile, extra)
			if err != nil {
				return err
			}
			v, err := saturation(cfg, reqs)
			if err != nil {
				return fmt.Errorf("size %s: %w", gpus[i].Profile, err)
			}
			s = sized{rate: v.SaturationRate}
			if s.cap, s.load, s.held, err = sizeCap(cfg, reqs, v.SaturationRate, rule); err != nil {
				return fmt.Errorf("size %s: %w", gpus[i].Profile, err)
			}
			s.kv, s.prefill = profileCapacity(cfg)
			s.batch = cfg.MaxNumSeqs
			done[gpus[i].Profile] = s
		}
		gpus[i].SaturationRate, gpus[i].Cap, gpus[i].CapLoad, gpus[i].CapHeld = s.rate, s.cap, s.load, s.held
		gpus[i].KVBlocks, gpus[i].PrefillRate, gpus[i].BatchLimit = s.kv, s.prefill, s.batch
	}
	return nil
}

// sizeCap is SizeFleet's cap rule for one profile: the highest load from
// report.CapLoad down at which report.CapGoodShare of the requests meet
// itlSLO (0: at report.CapLoad; report.CapLoadMin if none does, said in
// stat), and the requests held there: the 99th percentile with bursts at
// report.CapLoad, else the mean (Little's law). The load returned is rounded to the step for reports;
// the replays use the unrounded one.
func sizeCap(cfg gpusim.Config, reqs []gpusim.SimRequest, saturation float64, rule CapRule) (held int, load float64, stat string, err error) {
	itlSLO, bursts := rule.ITL, !rule.Mean
	cfg.StreamSummary = itlSLO > 0 // record the token times
	for load = report.CapLoad; ; load -= report.CapLoadStep {
		rate := load * saturation
		res, _, err := gpusim.Simulate(cfg, gpusim.Rescale(reqs, rate))
		if err != nil {
			return 0, 0, "", err
		}
		var sum time.Duration
		n, good := 0, 0
		for _, r := range res {
			if r.Rejected {
				continue
			}
			sum += r.Done - r.Arrival
			n++
			if len(r.Gaps) == 0 || stats.Percentile(r.Gaps, 99) <= itlSLO {
				good++
			}
		}
		n = max(n, 1)
		meets := itlSLO <= 0 || float64(good)/float64(n) >= report.CapGoodShare
		shown := math.Round(load/report.CapLoadStep) * report.CapLoadStep
		if bursts && meets && load == report.CapLoad {
			return max(1, heldQuantile(res, 0.99)), shown, "p99", nil
		}
		if meets || load-report.CapLoadStep < report.CapLoadMin-1e-9 {
			stat = "mean"
			if !meets {
				stat = "mean, SLO unmet"
			}
			return max(1, int(math.Round(rate*sum.Seconds()/float64(n)))), shown, stat, nil
		}
	}
}

// heldQuantile is the q-quantile, weighted by time, of how many requests
// a replay's GPU held (arrived, not done) between its first arrival and
// its last completion.
func heldQuantile(res []gpusim.SimResult, q float64) int {
	type event struct {
		at    time.Duration
		delta int
	}
	evs := make([]event, 0, 2*len(res))
	for _, r := range res {
		if !r.Rejected {
			evs = append(evs, event{r.Arrival, 1}, event{r.Done, -1})
		}
	}
	// Ties: departures first, so that a request leaving as another arrives
	// is never counted with it.
	slices.SortFunc(evs, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	held := map[int]time.Duration{}
	var total time.Duration
	n := 0
	for i := 0; i+1 < len(evs); i++ {
		n += evs[i].delta
		d := evs[i+1].at - evs[i].at
		held[n] += d
		total += d
	}
	levels := slices.Sorted(maps.Keys(held))
	var acc time.Duration
	for _, k := range levels {
		acc += held[k]
		if float64(acc) >= q*float64(total) {
			return k
		}
	}
	return 0
}

// profileCapacity is a calibrated GPU's KV cache in blocks and its prefill
// rate: one full chunk of max_batched_tokens over the step that computes
// it. Simple-mode GPUs (no profile) give 0, 0: the router's defaults.
func profileCapacity(cfg gpusim.Config) (kvBlocks int, prefillRate float64) {
	if cfg.Profile == "" {
		return 0, 0
	}
	p, err := gpusim.LookupProfile(cfg.Profile)
	if err != nil {
		return 0, 0
	}
	chunk := max(cfg.MaxBatchedTokens, 1)
	step := p.StepTime(chunk, 0, 1)
	if step > 0 {
		prefillRate = float64(chunk) / step.Seconds()
	}
	return p.KVCapacityBlocks(cfg.GPUMemUtil), prefillRate
}

// sizingConfig is the gpusim config of one GPU of profile with the fleet's
// extra keys, as the fleet file gives them to the running GPUs.
func sizingConfig(profile string, extra map[string]any) (gpusim.Config, error) {
	entry := map[string]any{"listen": "size", "models": []string{loadgen.Model}, "profile": profile}
	for k, v := range extra {
		if k != "stream_summary" {
			entry[k] = v
		}
	}
	b, err := yaml.Marshal([]map[string]any{entry})
	if err != nil {
		return gpusim.Config{}, err
	}
	cfgs, err := gpusim.ParseFleet(b, gpusim.DefaultConfig())
	if err != nil {
		return gpusim.Config{}, fmt.Errorf("fleet keys %v: %w", extra, err)
	}
	return cfgs[0], nil
}

// saturation is gpusim.FindSaturation with a scan that grows tenfold while
// the GPU sustains its top rate (short generations go fast). A replay too
// short to ever push the median TTFT past the bound, even with every
// request arriving at once, has no such rate; the GPU's highest completion
// rate stands in for it.
func saturation(cfg gpusim.Config, reqs []gpusim.SimRequest) (gpusim.Validation, error) {
	opts := gpusim.DefaultValidateOptions()
	opts.Step, opts.Tolerance = 0.25, 0.02
	for {
		v, err := gpusim.FindSaturation(cfg, reqs, opts)
		if err == nil || v.SaturationRate < opts.MaxRate-opts.Step {
			return v, err
		}
		if opts.MaxRate >= 4000 {
			v.SaturationRate = 0
			for _, r := range v.Runs {
				v.SaturationRate = max(v.SaturationRate, r.Throughput)
			}
			return v, nil
		}
		opts.Step, opts.Tolerance, opts.MaxRate = opts.Step*10, opts.Tolerance*10, opts.MaxRate*10
	}
}
