package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// Bounds of a description, checked before any run starts.
const (
	MaxGPUs     = 1024
	MaxReplicas = 64
)

// GPUClass is a group of identical GPUs.
type GPUClass struct {
	// Profile is a calibrated gpusim profile (gpusim.ProfileNames).
	Profile string `json:"profile"`
	Count   int    `json:"count"`
	// MaxConcurrency is the router's max_concurrency for each GPU of the
	// class; 0 is the engine's max_num_seqs, so that the router never
	// turns a request away that the engine would batch.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
}

// Engine is every GPU's engine settings (gpusim's flags of the same names).
type Engine struct {
	MaxNumSeqs       int     `json:"max_num_seqs"`
	MaxBatchedTokens int     `json:"max_batched_tokens"`
	GPUMemUtil       float64 `json:"gpu_mem_util"`
	// StreamSummary records each request's token times, for its p99
	// inter-token gap (Result.ITLP99); it costs a duration per token of
	// every running request, so it is off unless a validation needs it.
	StreamSummary bool `json:"stream_summary,omitempty"`
	// MaxLoras is each engine's LoRA slots (gpusim's max_loras; 0: no
	// LoRA), and LoRALoadMs the time an adapter takes to enter one. A
	// LoRA workload's adapters are every engine's lora_modules.
	MaxLoras   int     `json:"max_loras,omitempty"`
	LoRALoadMs float64 `json:"lora_load_ms,omitempty"`
}

// Router is what every router replica is configured with.
type Router struct {
	// RefreshInterval is how often each replica rereads its snapshot;
	// replica i of n first reads it at i/n of the interval.
	RefreshInterval time.Duration `json:"refresh_interval_ns"`
	// ScrapePeriod is how often each GPU's engine metrics reach the
	// store; GPU g of n is first scraped at g/n of the period. 0: the
	// product's telemetry.scrape_interval, or 50 ms for the emulations of
	// the Gateway API Inference Extension and llm-d that read engine
	// metrics (queue and KV scorers), as the benchmark runs them.
	ScrapePeriod time.Duration `json:"scrape_period_ns"`
	// TelemetryStale is telemetry.stale_after: older scrapes are unknown.
	TelemetryStale time.Duration `json:"telemetry_stale_ns"`
}

// SLO is what a request must meet to count towards goodput.
type SLO struct {
	TTFT time.Duration `json:"ttft_ns"`
	// TPOT bounds the request's mean time per output token after the
	// first.
	TPOT time.Duration `json:"tpot_ns"`
}

// Ladder is a range of offered rates: Steps rates evenly spaced from Min
// to Max (Steps 1: Min alone).
type Ladder struct {
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Steps int     `json:"steps"`
}

// Rates lists the ladder's rates.
func (l Ladder) Rates() []float64 {
	if l.Steps <= 1 {
		return []float64{l.Min}
	}
	out := make([]float64, l.Steps)
	for i := range out {
		out[i] = l.Min + (l.Max-l.Min)*float64(i)/float64(l.Steps-1)
	}
	return out
}

// Study is a set of runs: every strategy × replica count × rate × seed on
// one fleet and workload.
type Study struct {
	GPUs       []GPUClass `json:"gpus"`
	Engine     Engine     `json:"engine"`
	Replicas   []int      `json:"replicas"`
	Strategies []string   `json:"strategies"`
	// QPS are the offered rates (requests/s, Poisson); Ladder adds its
	// rates to them.
	QPS      []float64 `json:"qps"`
	Ladder   *Ladder   `json:"ladder,omitempty"`
	Seeds    []uint64  `json:"seeds"`
	Workload Workload  `json:"workload"`
	Router   Router    `json:"router"`
	SLO      SLO       `json:"slo"`
}

// DefaultStudy is one seed of round_robin on 16 A100s with one replica,
// with the product's router defaults and gpusim's engine defaults; the
// workload is the 150x5 shared-prefix preset at 4 req/s.
func DefaultStudy() Study {
	c := config.Default()
	g := gpusim.DefaultConfig()
	return Study{
		GPUs:       []GPUClass{{Profile: "a100-llama3-8b", Count: 16}},
		Engine:     Engine{MaxNumSeqs: g.MaxNumSeqs, MaxBatchedTokens: g.MaxBatchedTokens, GPUMemUtil: g.GPUMemUtil, LoRALoadMs: g.LoRALoadMs},
		Replicas:   []int{1},
		Strategies: []string{"round_robin"},
		QPS:        []float64{4},
		Seeds:      []uint64{1},
		Workload:   Workload{Kind: KindSharedPrefix, SharedPrefix: Preset150x5()},
		Router: Router{
			RefreshInterval: c.RefreshInterval.D(),
			TelemetryStale:  c.Telemetry.StaleAfter.D(),
		},
		SLO: SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond},
	}
}

// Rates is the study's offered rates: QPS then the ladder's, in order,
// without repeats.
func (s Study) Rates() []float64 {
	out := slices.Clone(s.QPS)
	if s.Ladder != nil {
		for _, r := range s.Ladder.Rates() {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// TotalGPUs counts the fleet's GPUs.
func (s Study) TotalGPUs() int {
	n := 0
	for _, g := range s.GPUs {
		n += g.Count
	}
	return n
}

// Validate refuses a study that is malformed or impossible, naming the
// field at fault, before anything runs. It loads nothing; Workload.Load
// checks the trace itself.
func (s Study) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if len(s.GPUs) == 0 {
		bad("gpus", "no GPU class given")
	}
	for i, g := range s.GPUs {
		f := fmt.Sprintf("gpus[%d]", i)
		if _, err := gpusim.LookupProfile(g.Profile); err != nil {
			bad(f+".profile", "%v", err)
		}
		if g.Count < 1 {
			bad(f+".count", "must be at least 1, got %d", g.Count)
		}
		if g.MaxConcurrency < 0 {
			bad(f+".max_concurrency", "must be >= 0, got %d", g.MaxConcurrency)
		}
	}
	total := s.TotalGPUs()
	if total > MaxGPUs {
		bad("gpus", "%d GPUs in all, at most %d", total, MaxGPUs)
	}
	if s.Engine.MaxNumSeqs < 1 {
		bad("engine.max_num_seqs", "must be at least 1, got %d", s.Engine.MaxNumSeqs)
	}
	if s.Engine.MaxBatchedTokens < 1 {
		bad("engine.max_batched_tokens", "must be at least 1, got %d", s.Engine.MaxBatchedTokens)
	}
	if !(s.Engine.GPUMemUtil > 0 && s.Engine.GPUMemUtil <= 1) {
		bad("engine.gpu_mem_util", "must be in (0, 1], got %g", s.Engine.GPUMemUtil)
	}
	if s.Engine.MaxLoras < 0 {
		bad("engine.max_loras", "must be >= 0, got %d", s.Engine.MaxLoras)
	}
	if s.Workload.Kind == KindLoRA && s.Engine.MaxLoras == 0 {
		bad("engine.max_loras", "a %s workload needs at least 1 LoRA slot per engine", KindLoRA)
	}
	if !(s.Engine.LoRALoadMs >= 0) {
		bad("engine.lora_load_ms", "must be >= 0, got %g", s.Engine.LoRALoadMs)
	}
	if len(s.Replicas) == 0 {
		bad("replicas", "no replica count given")
	}
	for _, n := range s.Replicas {
		switch {
		case n < 1:
			bad("replicas", "must be at least 1, got %d", n)
		case n > MaxReplicas:
			bad("replicas", "%d is more than %d", n, MaxReplicas)
		case total > 0 && n > total:
			bad("replicas", "%d router replicas for %d GPUs: more replicas than GPUs", n, total)
		}
	}
	if len(s.Strategies) == 0 {
		bad("strategies", "no strategy given")
	}
	for _, name := range s.Strategies {
		if !slices.Contains(scoring.Names(), name) {
			bad("strategies", "unknown strategy %q (want one of %s)", name, strings.Join(scoring.Names(), ", "))
		}
	}
	if s.Ladder != nil {
		l := *s.Ladder
		if !(l.Min > 0) {
			bad("ladder.min", "must be > 0, got %g", l.Min)
		}
		if l.Steps < 1 {
			bad("ladder.steps", "must be at least 1, got %d", l.Steps)
		}
		if l.Min > l.Max && l.Steps > 1 {
			bad("ladder.min", "%g is above ladder.max %g", l.Min, l.Max)
		}
	}
	for _, q := range s.QPS {
		if !(q > 0) {
			bad("qps", "must be > 0, got %g", q)
		}
	}
	if len(s.Rates()) == 0 {
		bad("qps", "no rate given (qps or ladder)")
	}
	if len(s.Seeds) == 0 {
		bad("seeds", "no seed given")
	}
	if s.Router.RefreshInterval <= 0 {
		bad("router.refresh_interval", "must be > 0, got %v", s.Router.RefreshInterval)
	}
	if s.Router.ScrapePeriod < 0 {
		bad("router.scrape_period", "must be >= 0, got %v", s.Router.ScrapePeriod)
	}
	if s.Router.TelemetryStale <= 0 {
		bad("router.telemetry_stale", "must be > 0, got %v", s.Router.TelemetryStale)
	}
	if s.SLO.TTFT <= 0 {
		bad("slo.ttft", "must be > 0, got %v", s.SLO.TTFT)
	}
	if s.SLO.TPOT <= 0 {
		bad("slo.tpot", "must be > 0, got %v", s.SLO.TPOT)
	}
	if err := s.Workload.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// scrapePeriod is the scrape period a strategy's runs use (see Router).
func (r Router) scrapePeriod(strategy string) time.Duration {
	if r.ScrapePeriod > 0 {
		return r.ScrapePeriod
	}
	switch strategy {
	case emulate.QueueKVMaxScore, emulate.PrefixQueueKVMaxScore, emulate.PrecisePrefixQueueKVMaxScore, emulate.LoRAQueueKVMaxScore:
		// The llm-d router's metrics refresh tick.
		return 50 * time.Millisecond
	}
	return config.Default().Telemetry.ScrapeInterval.D()
}
