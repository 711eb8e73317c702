package benchmark

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/internal/prefix"
)

// Job is one request of a workload.
type Job struct {
	// At is the arrival time from the start of the run, in GPU time (the
	// sender multiplies it by the fleet's slowdown).
	At     time.Duration `json:"at"`
	Prompt int           `json:"prompt_tokens"`
	// Output is the number of tokens the request really generates (the
	// trace's output length), told to gpusim as gpusim_output_tokens.
	Output int `json:"output_tokens"`
	// MaxTokens is what the client sends as max_tokens: 0 for none, an
	// upper bound such as a service-wide cap, or Output itself in the
	// oracle variant (see MaxTokensPolicy).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Row is the job's row in the trace: its prompt text is derived from it
	// (unique per row, or from the row's prefix block ids).
	Row int `json:"row"`
	// Blocks are the trace's prefix block ids (Mooncake), nil when the
	// trace has none: the prompt is then unique text.
	Blocks []int64 `json:"-"`
}

// Workload kinds and arrival processes.
const (
	KindTrace   = "trace"   // prompt and output lengths of the trace's rows
	KindExtreme = "extreme" // the trace's prompts, outputs of 10 or 2,000 tokens
	// ArrivalsPoisson draws exponential gaps at the target rate.
	ArrivalsPoisson = "poisson"
	// ArrivalsTrace keeps the trace's own arrival times (its bursts),
	// rescaled to the target mean rate.
	ArrivalsTrace = "trace"
)

// Extreme-mix job lengths: short jobs of about "10 tokens in 300 ms" and
// long ones of "2,000 tokens over 90 seconds".
const (
	shortOutput = 10
	longOutput  = 2000
)

// MaxTokens policies: what clients send as max_tokens.
const (
	// MaxTokensBound is what real clients send: half the requests no
	// max_tokens at all (OpenAI's clients leave it out unless told), half a
	// service-wide cap (MaxTokensCap, as gateways and SDK wrappers set),
	// drawn per request with the workload's seed. A strategy reading
	// max_tokens learns an upper bound, never the job's length.
	MaxTokensBound = "bound"
	// MaxTokensOracle sends every job's true output length: a labelled
	// variant that flatters every strategy that reads max_tokens.
	MaxTokensOracle = "oracle"
	// MaxTokensCap is the service-wide cap of MaxTokensBound.
	MaxTokensCap = 4096
)

// WorkloadOptions choose where request shapes and arrivals come from.
type WorkloadOptions struct {
	// TracePath is a CSV with the columns arrived_at, num_prefill_tokens
	// and num_decode_tokens, or a Mooncake JSON-lines trace (.jsonl) with
	// prefix block ids. Absent (no such file): a synthetic trace with the
	// Azure conversation trace's length distribution.
	TracePath string
	// TokenScale multiplies every length of the trace (prompt, output and
	// the tokens behind each prefix block id); 0 means 1. The benchmark's
	// short Mooncake run uses it to fit two cores; the fleet's KV caches are
	// scaled alike so they hold as many requests as at full scale.
	TokenScale float64
	// MaxTokens is MaxTokensBound (the default) or MaxTokensOracle.
	MaxTokens string
	// MaxPrompt clamps prompts (tokens, after scaling); 0 means maxPrompt.
	MaxPrompt int
	Kind      string // KindTrace or KindExtreme
	Arrivals  string // ArrivalsPoisson or ArrivalsTrace
	// LongShare is the share of 2,000-token jobs in the extreme mix.
	LongShare float64
}

// Workload draws reproducible job lists from a trace.
type Workload struct {
	opts WorkloadOptions
	rows []gpusim.SimRequest
	// blocks are each row's prefix block ids (Mooncake), nil otherwise.
	blocks [][]int64
	// blockTokens is the tokens behind one block id after scaling.
	blockTokens int
	// Source says where the rows came from, for the report.
	Source string
}

// maxPrompt keeps every job within the smallest GPU's KV cache (an A40
// holds about 50k tokens of Llama-2-7B), so no configuration gets
// rejections for a job no GPU could take.
const maxPrompt = 16000

// LoadWorkload reads the trace (or makes the synthetic one) and checks the
// options.
func LoadWorkload(o WorkloadOptions) (*Workload, error) {
	if o.Kind == "" {
		o.Kind = KindTrace
	}
	if o.Arrivals == "" {
		o.Arrivals = ArrivalsPoisson
	}
	if o.Kind != KindTrace && o.Kind != KindExtreme {
		return nil, fmt.Errorf("workload %q: want %s or %s", o.Kind, KindTrace, KindExtreme)
	}
	if o.Arrivals != ArrivalsPoisson && o.Arrivals != ArrivalsTrace {
		return nil, fmt.Errorf("arrivals %q: want %s or %s", o.Arrivals, ArrivalsPoisson, ArrivalsTrace)
	}
	if o.LongShare < 0 || o.LongShare > 1 {
		return nil, fmt.Errorf("long share %g: want [0, 1]", o.LongShare)
	}
	if o.TokenScale == 0 {
		o.TokenScale = 1
	}
	if o.TokenScale < 0 || o.TokenScale > 1 {
		return nil, fmt.Errorf("token scale %g: want (0, 1]", o.TokenScale)
	}
	if o.MaxTokens == "" {
		o.MaxTokens = MaxTokensBound
	}
	if o.MaxTokens != MaxTokensBound && o.MaxTokens != MaxTokensOracle {
		return nil, fmt.Errorf("max_tokens policy %q: want %s or %s", o.MaxTokens, MaxTokensBound, MaxTokensOracle)
	}
	if o.MaxPrompt == 0 {
		o.MaxPrompt = maxPrompt
	}
	w := &Workload{opts: o}
	if strings.HasSuffix(o.TracePath, ".jsonl") {
		return w, w.loadMooncake()
	}
	rows, err := gpusim.LoadTraceFile(o.TracePath, 0)
	switch {
	case o.TracePath == "" || errors.Is(err, fs.ErrNotExist):
		w.rows, w.Source = SyntheticTrace(20000, 1), "synthetic (Azure conversation length distribution)"
	case err != nil:
		return nil, fmt.Errorf("trace %s: %w", o.TracePath, err)
	default:
		w.rows, w.Source = rows, o.TracePath
	}
	for i := range w.rows {
		r := &w.rows[i]
		r.PromptTokens = min(scaleTokens(r.PromptTokens, o.TokenScale), o.MaxPrompt)
		r.OutputTokens = scaleTokens(r.OutputTokens, o.TokenScale)
	}
	return w, nil
}

// loadMooncake reads a Mooncake trace: lengths scaled and clamped as for
// CSV traces, each row's block ids cut to the ones its prompt still covers.
func (w *Workload) loadMooncake() error {
	o := w.opts
	rows, err := gpusim.LoadMooncake(o.TracePath)
	if err != nil {
		return fmt.Errorf("trace %s: %w", o.TracePath, err)
	}
	w.Source = o.TracePath
	w.blockTokens = max(1, scaleTokens(gpusim.MooncakeBlockTokens, o.TokenScale))
	for _, r := range rows {
		p := min(scaleTokens(r.InputLength, o.TokenScale), o.MaxPrompt)
		ids := r.HashIDs[:min(len(r.HashIDs), (p+w.blockTokens-1)/w.blockTokens)]
		w.rows = append(w.rows, gpusim.SimRequest{Arrival: r.Timestamp, PromptTokens: p, OutputTokens: scaleTokens(r.OutputLength, o.TokenScale)})
		w.blocks = append(w.blocks, ids)
	}
	if len(w.rows) < 2 {
		return fmt.Errorf("trace %s has fewer than 2 requests", o.TracePath)
	}
	return nil
}

// scaleTokens is n·scale rounded, at least 1.
func scaleTokens(n int, scale float64) int {
	return max(1, int(math.Round(float64(n)*scale)))
}

// Prefixed reports whether the trace carries prefix block ids.
func (w *Workload) Prefixed() bool { return w.blocks != nil }

// BlockTokens is the tokens behind one prefix block id (0 without ids).
func (w *Workload) BlockTokens() int { return w.blockTokens }

// Name describes the workload for reports.
func (w *Workload) Name() string {
	if w.opts.Kind == KindExtreme {
		return fmt.Sprintf("extreme mix (%d and %d output tokens, %.0f%% long), %s arrivals", shortOutput, longOutput, 100*w.opts.LongShare, w.opts.Arrivals)
	}
	name := fmt.Sprintf("trace lengths, %s arrivals, max_tokens %s", w.opts.Arrivals, w.maxTokensWord())
	if w.opts.TokenScale != 1 {
		name += fmt.Sprintf(", every length scaled by %g", w.opts.TokenScale)
	}
	return name
}

func (w *Workload) maxTokensWord() string {
	if w.opts.MaxTokens == MaxTokensOracle {
		return "= the true output length (oracle variant)"
	}
	return fmt.Sprintf("absent or %d (half each)", MaxTokensCap)
}

// Jobs returns n jobs at a mean rate of rate req/s (GPU time). The same
// seed gives the same request shapes and the same arrival pattern at every
// rate (the gaps are the same draws divided by the rate), so loads and
// configurations differ only in what they are meant to.
func (w *Workload) Jobs(n int, rate float64, seed uint64) []Job {
	if n <= 0 || rate <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	start := 0
	if len(w.rows) > n {
		start = rng.IntN(len(w.rows) - n)
	}
	jobs := make([]Job, n)
	for i := range jobs {
		row := (start + i) % len(w.rows)
		r := w.rows[row]
		jobs[i] = Job{Prompt: r.PromptTokens, Output: r.OutputTokens, Row: row}
		if w.blocks != nil {
			jobs[i].Blocks = w.blocks[row]
		}
		if w.opts.Kind == KindExtreme {
			jobs[i].Output = shortOutput
			if rng.Float64() < w.opts.LongShare {
				jobs[i].Output = longOutput
			}
		}
	}
	// A generator of its own, so the oracle and bound variants see the
	// same shapes and arrivals.
	if w.opts.MaxTokens == MaxTokensOracle {
		for i := range jobs {
			jobs[i].MaxTokens = jobs[i].Output
		}
	} else {
		mt := rand.New(rand.NewPCG(seed^0x6d61785f746f6b, seed))
		for i := range jobs {
			if mt.IntN(2) == 1 {
				jobs[i].MaxTokens = MaxTokensCap
			}
		}
	}
	switch w.opts.Arrivals {
	case ArrivalsTrace:
		traceArrivals(jobs, w.rows, start, rate)
	default:
		poissonArrivals(jobs, rate, rng)
	}
	return jobs
}

// poissonArrivals spaces jobs by exponential gaps of mean 1/rate; the first
// arrives at 0.
func poissonArrivals(jobs []Job, rate float64, rng *rand.Rand) {
	var t float64
	for i := range jobs {
		if i > 0 {
			t += rng.ExpFloat64() / rate
		}
		jobs[i].At = time.Duration(t * float64(time.Second))
	}
}

// traceArrivals gives jobs the arrival times of rows[start:], shifted to
// start at 0 and scaled so the mean rate over the jobs is rate. A window
// that wraps past the end of the trace continues after its last arrival.
func traceArrivals(jobs []Job, rows []gpusim.SimRequest, start int, rate float64) {
	if len(jobs) == 1 {
		jobs[0].At = 0
		return
	}
	at := make([]float64, len(jobs))
	offset := 0.0
	span := (rows[len(rows)-1].Arrival - rows[0].Arrival).Seconds()
	for i := range jobs {
		k := start + i
		if k > 0 && k%len(rows) == 0 {
			offset += span + span/float64(len(rows))
		}
		at[i] = offset + rows[k%len(rows)].Arrival.Seconds() - rows[start].Arrival.Seconds()
	}
	total := at[len(at)-1]
	scale := 0.0
	if total > 0 {
		scale = float64(len(jobs)-1) / rate / total
	}
	for i := range jobs {
		jobs[i].At = time.Duration(at[i] * scale * float64(time.Second))
	}
}

// SyntheticTrace stands in for the Azure conversation trace when it is
// absent: n requests at 1 req/s (Poisson), prompt and output lengths
// log-normal with the trace's medians (1,020 and 129 tokens) and means
// (about 1,155 and 190), clamped to [1, 8192] and [1, 1000].
func SyntheticTrace(n int, seed uint64) []gpusim.SimRequest {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	// Log-normal: median m, mean m·exp(σ²/2).
	const promptSigma, outputSigma = 0.5, 0.8
	out := make([]gpusim.SimRequest, n)
	var t float64
	for i := range out {
		if i > 0 {
			t += rng.ExpFloat64()
		}
		p := 1020 * math.Exp(promptSigma*rng.NormFloat64())
		o := 129 * math.Exp(outputSigma*rng.NormFloat64())
		out[i] = gpusim.SimRequest{
			Arrival:      time.Duration(t * float64(time.Second)),
			PromptTokens: min(max(int(p), 1), 8192),
			OutputTokens: min(max(int(o), 1), 1000),
		}
	}
	return out
}

// Request is the job as a streamed chat request. Its prompt starts with
// nonce, which differs from run to run, so that blocks one run left in the
// GPUs' prefix caches never serve the next; after it comes the text of the
// job's prefix block ids (equal ids, equal text: blockTokens tokens each),
// or unique text for a trace without ids. The prompt is Prompt tokens of
// text (4 bytes each), and gpusim is told the exact lengths.
func (j Job) Request(nonce string, blockTokens int) Request {
	size := j.Prompt * prefix.BytesPerToken
	b := make([]byte, 0, size+gpusim.MooncakeBlockTokens*prefix.BytesPerToken)
	b = append(b, nonce...)
	if j.Blocks != nil {
		per := blockTokens * prefix.BytesPerToken
		for _, id := range j.Blocks {
			if len(b) >= size {
				break
			}
			n := len(b)
			b = gpusim.AppendMooncakeBlockText(b, id)
			b = b[:min(len(b), n+per)]
		}
	} else {
		// The row number in the first block makes every prompt's first
		// block, and so every block after it, its own.
		b = fmt.Appendf(b, " request %d.", j.Row)
		for len(b) < size {
			b = append(b, " word"...)
		}
	}
	text := string(b[:min(len(b), max(size, len(nonce)+1))])
	return Request{Model: Model, Content: text, PromptTokens: j.Prompt, OutputTokens: j.Output, MaxTokens: j.MaxTokens, Stream: true}
}
