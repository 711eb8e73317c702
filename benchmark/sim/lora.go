package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// KindLoRA is many LoRA adapters of one base model: each request names an
// adapter, drawn by Zipf popularity, whose ranking may rotate over time.
const KindLoRA = "lora"

// MaxAdapters bounds a LoRA workload's adapters.
const MaxAdapters = 10_000

// defaultLoRARequests is how many requests a LoRA run sends by default.
const defaultLoRARequests = 2000

// LoRAWorkload is the adapters and request shapes of KindLoRA.
type LoRAWorkload struct {
	// Adapters is how many adapters of the base model requests name.
	Adapters int `json:"adapters"`
	// ZipfS is the popularity exponent: the adapter of rank k (from 1) is
	// requested in proportion to 1/k^s (0: uniform).
	ZipfS float64 `json:"zipf_s"`
	// ShiftEvery, when > 0, rotates the ranking every ShiftEvery of
	// virtual time by ShiftBy ranks (0: a fifth of the adapters), so that
	// popular adapters turn cold and cold ones popular.
	ShiftEvery time.Duration `json:"shift_every_ns,omitempty"`
	ShiftBy    int           `json:"shift_by,omitempty"`
	// PromptLen and OutputLen are the mean prompt and output tokens; each
	// request's are drawn uniformly within ±50 % of them.
	PromptLen int `json:"prompt_len"`
	OutputLen int `json:"output_len"`
}

// LoRAPreset is the LoRA study's workload: 50 adapters of one base model
// with Zipf popularity (s = 1), prompts of about 1,024 tokens and outputs
// of about 256.
func LoRAPreset() LoRAWorkload {
	return LoRAWorkload{Adapters: 50, ZipfS: 1, PromptLen: 1024, OutputLen: 256}
}

// LoRAShiftingPreset is LoRAPreset whose popularity ranking rotates by 10
// ranks every 30 s.
func LoRAShiftingPreset() LoRAWorkload {
	w := LoRAPreset()
	w.ShiftEvery, w.ShiftBy = 30*time.Second, 10
	return w
}

// AdapterNames are the workload's adapter names, by rank at time 0.
func (l LoRAWorkload) AdapterNames() []string {
	out := make([]string, l.Adapters)
	for i := range out {
		out[i] = fmt.Sprintf("adapter-%02d", i)
	}
	return out
}

// shiftBy is the rotation of one shift.
func (l LoRAWorkload) shiftBy() int {
	if l.ShiftBy > 0 {
		return l.ShiftBy
	}
	return max(1, l.Adapters/5)
}

// validate checks the fields, naming them under prefix.
func (l LoRAWorkload) validate(bad func(field, format string, a ...any)) {
	if l.Adapters < 1 || l.Adapters > MaxAdapters {
		bad("lora.adapters", "must be in [1, %d], got %d", MaxAdapters, l.Adapters)
	}
	if !(l.ZipfS >= 0) || math.IsInf(l.ZipfS, 0) {
		bad("lora.zipf_s", "must be a finite number >= 0, got %g", l.ZipfS)
	}
	if l.ShiftEvery < 0 {
		bad("lora.shift_every", "must be >= 0, got %v", l.ShiftEvery)
	}
	if l.ShiftBy < 0 || l.Adapters > 0 && l.ShiftBy >= l.Adapters {
		bad("lora.shift_by", "must be in [0, adapters), got %d", l.ShiftBy)
	}
	if l.ShiftBy > 0 && l.ShiftEvery == 0 {
		bad("lora.shift_by", "given without lora.shift_every")
	}
	if l.PromptLen < 1 {
		bad("lora.prompt_len", "must be at least 1, got %d", l.PromptLen)
	}
	if l.OutputLen < 1 {
		bad("lora.output_len", "must be at least 1, got %d", l.OutputLen)
	}
}

// loraRequests are n requests at rate req/s (Poisson), each naming an
// adapter drawn by its popularity at its arrival.
func loraRequests(l LoRAWorkload, n int, rate float64, rng *rand.Rand) []Request {
	if n == 0 {
		n = defaultLoRARequests
	}
	names := l.AdapterNames()
	cum := make([]float64, l.Adapters)
	total := 0.0
	for k := range cum {
		total += math.Pow(float64(k+1), -l.ZipfS)
		cum[k] = total
	}
	out := make([]Request, n)
	var t float64
	for i := range out {
		if i > 0 {
			t += rng.ExpFloat64() / rate
		}
		at := time.Duration(t * float64(time.Second))
		rank := sort.SearchFloat64s(cum, rng.Float64()*total)
		rank = min(rank, l.Adapters-1)
		if l.ShiftEvery > 0 {
			rank = (rank + int(at/l.ShiftEvery)*l.shiftBy()) % l.Adapters
		}
		prompt := spreadLen(l.PromptLen, rng)
		output := spreadLen(l.OutputLen, rng)
		out[i] = Request{Arrival: at, Prompt: prompt, Output: output, MaxTokens: output, Adapter: names[rank]}
	}
	return out
}

// spreadLen is mean ±50 %, uniformly, at least 1.
func spreadLen(mean int, rng *rand.Rand) int {
	return max(1, mean/2+rng.IntN(mean+1))
}

// The GIE LoRA emulation reads the engines' lora_requests_info, which
// only the simulator has, so the simulator registers it as it does the
// precise prefix emulation (precise.go): a replica's instance joins the
// feed of the run building it, and every scrape observes every GPU's
// figures into every instance. Envoy's LEAST_REQUEST stand-in is the
// simulator's too (emulate.SimulatorOnly).
func init() {
	scoring.RegisterStrategy(emulate.LeastRequestP2C, func(scoring.Params) scoring.Strategy { return emulate.NewLeastRequestP2C() })
	scoring.RegisterStrategy(emulate.LoRAQueueKVMaxScore, func(scoring.Params) scoring.Strategy {
		l := emulate.NewLoRAAffinity()
		if f := loraBuild.feed.Load(); f != nil {
			f.replicas = append(f.replicas, l)
		}
		return l
	})
}

// loraBuild is how a factory call reaches the run building its replicas.
var loraBuild struct {
	mu   sync.Mutex
	feed atomic.Pointer[loraFeed]
}

// loraFeed carries each scrape's LoRA figures to every replica's
// emulation.
type loraFeed struct {
	replicas []*emulate.LoRAAffinity
}

func (f *loraFeed) observe(gpu string, st *gpusim.LoRAState) {
	if f == nil || st == nil {
		return
	}
	info := emulate.LoRAInfo{Running: st.Running, Waiting: st.Waiting, MaxLoras: st.MaxLoras}
	for _, l := range f.replicas {
		l.Observe(gpu, info)
	}
}

// LoRAFigures are a configuration's adapter figures over its seeds.
type LoRAFigures struct {
	// LoadsPer1000 are adapter loads (slot entries, every GPU) per 1,000
	// requests, LoadsPerMinute per minute of the run (first arrival to
	// last token), over the seeds.
	LoadsPer1000   stats.Spread `json:"loads_per_1000"`
	LoadsPerMinute stats.Spread `json:"loads_per_minute"`
	// MissingAdapter counts requests that failed because no GPU served
	// their adapter (refused by the router as an unknown model, or by the
	// engine).
	MissingAdapter int `json:"missing_adapter"`
	// LoadsRatio is LoadsPer1000 over a baseline's at the same replicas
	// and rate (RatioBaselines), pooled over seeds, with the 95 %
	// interval of a seed-paired bootstrap, by baseline.
	LoadsRatio map[string]stats.Estimate `json:"loads_per_1000_ratio,omitempty"`

	seeds []loraSeed
}

// loraSeed is one run's counts.
type loraSeed struct {
	loads, requests int
}

// loraFigures pools the runs' adapter counts.
func loraFigures(runs []*RunResult) *LoRAFigures {
	f := &LoRAFigures{}
	var per1000, perMinute []float64
	for _, r := range runs {
		f.MissingAdapter += r.MissingAdapter
		n := len(r.Requests)
		f.seeds = append(f.seeds, loraSeed{int(r.LoRALoads), n})
		if n > 0 {
			per1000 = append(per1000, 1000*float64(r.LoRALoads)/float64(n))
		}
		if span := runSpan(r.Requests); span > 0 {
			perMinute = append(perMinute, float64(r.LoRALoads)/span.Minutes())
		}
	}
	f.LoadsPer1000, f.LoadsPerMinute = stats.SpreadOf(per1000), stats.SpreadOf(perMinute)
	return f
}

// runSpan is the first arrival to the last token.
func runSpan(rs []Result) time.Duration {
	var first, last time.Duration = -1, 0
	for _, r := range rs {
		if first < 0 || r.Arrival < first {
			first = r.Arrival
		}
		last = max(last, r.Done)
	}
	return max(0, last-first)
}

// loadsRatio is a's pooled loads per request over b's, with the interval
// of a bootstrap that draws seeds with replacement, the same draws for
// both (the seeds are the study's, in order), seeded by seed.
func loadsRatio(a, b []loraSeed, seed uint64) stats.Estimate {
	pooled := func(s []loraSeed, idx []int) float64 {
		loads, reqs := 0, 0
		for _, i := range idx {
			loads, reqs = loads+s[i].loads, reqs+s[i].requests
		}
		if reqs == 0 {
			return 0
		}
		return float64(loads) / float64(reqs)
	}
	n := min(len(a), len(b))
	if n == 0 {
		return stats.Estimate{}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	e := stats.Estimate{}
	if d := pooled(b, all); d > 0 {
		e.Value = pooled(a, all) / d
	}
	for i := range n {
		if d := pooled(b, []int{i}); d > 0 {
			e.Seeds = append(e.Seeds, pooled(a, []int{i})/d)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7261))
	idx := make([]int, n)
	var reps []float64
	for range stats.Replicates {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		if d := pooled(b, idx); d > 0 {
			reps = append(reps, pooled(a, idx)/d)
		}
	}
	if len(reps) == 0 {
		e.Lo, e.Hi = e.Value, e.Value
		return e
	}
	sort.Float64s(reps)
	e.Lo, e.Hi = reps[int(0.025*float64(len(reps)))], reps[min(len(reps)-1, int(0.975*float64(len(reps))))]
	return e
}
