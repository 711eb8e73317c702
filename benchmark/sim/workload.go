package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/scoring/prefix"
)

// Workload kinds.
const (
	// KindSharedPrefix is inference-perf's shared_prefix data generator:
	// groups of prompts that share a system prompt.
	KindSharedPrefix = "shared_prefix"
	// KindTrace replays the request shapes of a trace file: a CSV with
	// arrived_at, num_prefill_tokens and num_decode_tokens (the Azure
	// traces in benchmark/traces), or a Mooncake JSON-lines trace (.jsonl)
	// whose hash_ids mark shared prefixes.
	KindTrace = "trace"
	// KindSummarization is long documents with short answers, the shape
	// of the arXiv summarisation benchmarks of disaggregated serving:
	// prompts uniform in [SummaryPromptMin, SummaryPromptMax] tokens,
	// outputs uniform in [SummaryOutputMin, SummaryOutputMax], every
	// document its own (no shared prefix).
	KindSummarization = "summarization"
)

// The summarization shape's bounds, in tokens.
const (
	SummaryPromptMin = 8192
	SummaryPromptMax = 16384
	SummaryOutputMin = 200
	SummaryOutputMax = 500
)

// MaxTokens policies, what a client sends as max_tokens (see loadgen).
const (
	MaxTokensOracle = loadgen.MaxTokensOracle
	MaxTokensBound  = loadgen.MaxTokensBound
)

// Arrival processes.
const (
	// ArrivalsPoisson draws exponential gaps at the run's rate from its
	// seed.
	ArrivalsPoisson = "poisson"
	// ArrivalsTrace keeps a trace's own arrival times (its bursts),
	// rescaled to the run's mean rate.
	ArrivalsTrace = "trace"
)

// Workload says what requests a run sends.
type Workload struct {
	Kind string `json:"kind"`
	// Arrivals is ArrivalsPoisson (empty: the default) or, for traces,
	// ArrivalsTrace.
	Arrivals     string       `json:"arrivals,omitempty"`
	SharedPrefix SharedPrefix `json:"shared_prefix,omitzero"`
	// LoRA is the adapters and shapes of KindLoRA.
	LoRA LoRAWorkload `json:"lora,omitzero"`
	// Trace is the trace file of KindTrace.
	Trace string `json:"trace,omitempty"`
	// Requests is how many requests a run sends: 0 is every prompt once
	// (shared_prefix) or the trace's first 1,000 rows.
	Requests int `json:"requests,omitempty"`
	// MaxTokens is MaxTokensOracle (every request sends its true output
	// length, as inference-perf does) or MaxTokensBound (half send none,
	// half 4,096, as llm-bench compare does). Empty: oracle for
	// shared_prefix, bound for traces.
	MaxTokens string `json:"max_tokens,omitempty"`
}

// SharedPrefix are inference-perf's shared_prefix parameters, by its
// names; lengths are tokens.
type SharedPrefix struct {
	NumGroups          int `json:"num_groups"`
	NumPromptsPerGroup int `json:"num_prompts_per_group"`
	SystemPromptLen    int `json:"system_prompt_len"`
	QuestionLen        int `json:"question_len"`
	OutputLen          int `json:"output_len"`
}

// Preset150x5 is llm-d's shared-prefix benchmark: 150 groups of 5 prompts,
// a 6,000-token system prompt, 1,200-token questions, 1,000 output tokens.
func Preset150x5() SharedPrefix {
	return SharedPrefix{NumGroups: 150, NumPromptsPerGroup: 5, SystemPromptLen: 6000, QuestionLen: 1200, OutputLen: 1000}
}

// defaultTraceRequests is how many rows of a trace a run replays by default.
const defaultTraceRequests = 1000

// Validate checks the workload's fields (not the trace file's content).
func (w Workload) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("workload.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	switch w.Kind {
	case KindSharedPrefix:
		sp := w.SharedPrefix
		for _, f := range []struct {
			name string
			v    int
		}{
			{"num_groups", sp.NumGroups},
			{"num_prompts_per_group", sp.NumPromptsPerGroup},
			{"system_prompt_len", sp.SystemPromptLen},
			{"question_len", sp.QuestionLen},
			{"output_len", sp.OutputLen},
		} {
			if f.v < 1 {
				bad("shared_prefix."+f.name, "must be at least 1, got %d", f.v)
			}
		}
		if w.Trace != "" {
			bad("trace", "given with kind %s, which reads no trace", KindSharedPrefix)
		}
	case KindTrace:
		if w.Trace == "" {
			bad("trace", "a trace file is required with kind %s", KindTrace)
		}
	case KindLoRA:
		w.LoRA.validate(bad)
		if w.Trace != "" {
			bad("trace", "given with kind %s, which reads no trace", KindLoRA)
		}
	case KindSummarization:
		if w.Trace != "" {
			bad("trace", "given with kind %s, which reads no trace", KindSummarization)
		}
	default:
		bad("kind", "%q: want %s, %s, %s or %s", w.Kind, KindSharedPrefix, KindTrace, KindLoRA, KindSummarization)
	}
	switch w.Arrivals {
	case "", ArrivalsPoisson:
	case ArrivalsTrace:
		if w.Kind != KindTrace {
			bad("arrivals", "%s arrivals need kind %s", ArrivalsTrace, KindTrace)
		}
	default:
		bad("arrivals", "%q: want %s or %s", w.Arrivals, ArrivalsPoisson, ArrivalsTrace)
	}
	if w.Requests < 0 {
		bad("requests", "must be >= 0, got %d", w.Requests)
	}
	if w.MaxTokens != "" && w.MaxTokens != MaxTokensOracle && w.MaxTokens != MaxTokensBound {
		bad("max_tokens", "%q: want %s or %s", w.MaxTokens, MaxTokensOracle, MaxTokensBound)
	}
	return errors.Join(errs...)
}

// Request is one request of a run.
type Request struct {
	Arrival time.Duration
	Prompt  int
	Output  int // tokens the request really generates
	// MaxTokens is what the router is told (0: none).
	MaxTokens int
	// Blocks are the prompt's chained block hashes (scoring/prefix), as
	// the router and the engine derive them from the request body; nil
	// for a prompt that shares nothing (the Azure traces).
	Blocks []uint64
	// Adapter is the LoRA adapter the request names as its model; ""
	// names the base model.
	Adapter string
}

// model is the model the request names.
func (q Request) model() string {
	if q.Adapter != "" {
		return q.Adapter
	}
	return loadgen.Model
}

// shape is a request without its arrival; at is its arrival in the trace
// (traces only).
type shape struct {
	prompt, output int
	blocks         []uint64
	at             time.Duration
}

// source makes each run's requests from a loaded workload.
type source struct {
	w      Workload
	shapes []shape // trace kinds: the rows, in trace order
}

// load reads the workload's trace, if any, so that runs share it.
func (w Workload) load() (*source, error) {
	s := &source{w: w}
	if w.Kind != KindTrace {
		return s, nil
	}
	n := w.Requests
	if n == 0 {
		n = defaultTraceRequests
	}
	if strings.EqualFold(filepath.Ext(w.Trace), ".jsonl") {
		rows, err := gpusim.LoadMooncake(w.Trace)
		if err != nil {
			return nil, fmt.Errorf("workload.trace %s: %w", w.Trace, err)
		}
		for _, r := range rows[:min(n, len(rows))] {
			sr := r.SimRequest()
			s.shapes = append(s.shapes, shape{sr.PromptTokens, sr.OutputTokens, sr.Blocks, sr.Arrival})
		}
		return s, nil
	}
	rows, err := gpusim.LoadTraceFile(w.Trace, n)
	if err != nil {
		return nil, fmt.Errorf("workload.trace %s: %w", w.Trace, err)
	}
	for _, r := range rows {
		// Each Azure prompt is its own text: it would miss every cache,
		// which no blocks says as well, without hashing it.
		s.shapes = append(s.shapes, shape{prompt: r.PromptTokens, output: r.OutputTokens, at: r.Arrival})
	}
	return s, nil
}

// requests are a run's requests at rate req/s for seed, sorted by arrival.
// The same seed gives the same shapes in the same order at every rate, and
// arrivals that only scale with it.
func (s *source) requests(rate float64, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, seed^0x73696d5f77726b6c))
	if s.w.Kind == KindLoRA {
		return loraRequests(s.w.LoRA, s.w.Requests, rate, rng)
	}
	var shapes []shape
	switch s.w.Kind {
	case KindSharedPrefix:
		shapes = sharedPrefixShapes(s.w.SharedPrefix, s.w.Requests, seed, rng)
	case KindSummarization:
		shapes = summaryShapes(s.w.Requests, rng)
	default:
		shapes = s.shapes
		if s.w.Arrivals == ArrivalsTrace {
			shapes = slices.Clone(shapes)
			slices.SortStableFunc(shapes, func(a, b shape) int { return cmp.Compare(a.at, b.at) })
		}
	}
	policy := s.w.MaxTokens
	if policy == "" {
		policy = MaxTokensBound
		if s.w.Kind == KindSharedPrefix || s.w.Kind == KindSummarization {
			policy = MaxTokensOracle
		}
	}
	out := make([]Request, len(shapes))
	at := arrivals(shapes, s.w.Arrivals, rate, rng)
	for i, sh := range shapes {
		out[i] = Request{Arrival: at[i], Prompt: sh.prompt, Output: sh.output, Blocks: sh.blocks}
		switch {
		case policy == MaxTokensOracle:
			out[i].MaxTokens = sh.output
		case rng.IntN(2) == 1:
			out[i].MaxTokens = loadgen.MaxTokensCap
		}
	}
	return out
}

// arrivals times the shapes: Poisson at rate, or the trace's own times
// from its first, scaled so that the mean rate is rate (gpusim.Rescale;
// shapes must then be sorted by their trace times).
func arrivals(shapes []shape, process string, rate float64, rng *rand.Rand) []time.Duration {
	out := make([]time.Duration, len(shapes))
	if process == ArrivalsTrace && len(shapes) > 1 {
		reqs := make([]gpusim.SimRequest, len(shapes))
		for i, sh := range shapes {
			reqs[i].Arrival = sh.at
		}
		for i, r := range gpusim.Rescale(reqs, rate) {
			out[i] = r.Arrival
		}
		return out
	}
	var t float64
	for i := range out {
		if i > 0 {
			t += rng.ExpFloat64() / rate
		}
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// sharedPrefixShapes are n prompts (0: every group's prompts once) of the
// shared_prefix generator, in a random order: group g's prompts share its
// system prompt, each then has a question of its own. Texts are gpusim's
// block texts of ids unique to the seed, group and question.
func sharedPrefixShapes(sp SharedPrefix, n int, seed uint64, rng *rand.Rand) []shape {
	total := sp.NumGroups * sp.NumPromptsPerGroup
	if n == 0 {
		n = total
	}
	order := rng.Perm(total)
	sysBytes := sp.SystemPromptLen * prefix.BytesPerToken
	qBytes := sp.QuestionLen * prefix.BytesPerToken
	systems := make(map[int][]byte)
	out := make([]shape, n)
	buf := make([]byte, 0, sysBytes+qBytes+gpusim.MooncakeBlockTokens*prefix.BytesPerToken)
	for i := range out {
		k := order[i%total]
		g := k / sp.NumPromptsPerGroup
		sys, ok := systems[g]
		if !ok {
			sys = blockText(nil, textID(seed, 0, g), sysBytes)
			systems[g] = sys
		}
		buf = append(buf[:0], sys...)
		// Questions repeated past the first round are new questions.
		buf = blockText(buf, textID(seed, 1+i/total, k), qBytes)
		out[i] = shape{
			prompt: sp.SystemPromptLen + sp.QuestionLen, output: sp.OutputLen,
			blocks: gpusim.ChatBlockHashes(string(buf)),
		}
	}
	return out
}

// textID is the first block-text id of (seed, space, k): distinct
// triples start 1,024 ids apart, so that texts of up to 1,024 blocks
// (512k tokens) share none.
func textID(seed uint64, space, k int) int64 {
	return int64((seed*0x9e3779b97f4a7c15 ^ uint64(space)<<48 ^ uint64(k)<<10) &^ (1 << 63))
}

// blockText appends n bytes of text made of the block texts of id, id+1, …
func blockText(dst []byte, id int64, n int) []byte {
	end := len(dst) + n
	for len(dst) < end {
		dst = gpusim.AppendMooncakeBlockText(dst, id)
		id++
	}
	return dst[:end]
}

// summaryShapes are n (0: the default trace length) summarization
// requests.
func summaryShapes(n int, rng *rand.Rand) []shape {
	if n == 0 {
		n = defaultTraceRequests
	}
	out := make([]shape, n)
	for i := range out {
		out[i] = shape{
			prompt: SummaryPromptMin + rng.IntN(SummaryPromptMax-SummaryPromptMin+1),
			output: SummaryOutputMin + rng.IntN(SummaryOutputMax-SummaryOutputMin+1),
		}
	}
	return out
}
