package benchmark

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"time"

	"github.com/llm-router/llm-router/gpusim"
)

// Job is one request of a workload.
type Job struct {
	// At is the arrival time from the start of the run, in GPU time (the
	// sender multiplies it by the fleet's slowdown).
	At     time.Duration `json:"at"`
	Prompt int           `json:"prompt_tokens"`
	// Output is the number of tokens generated, sent as max_tokens.
	Output int `json:"output_tokens"`
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

// Extreme-mix job lengths: the brief's "10 tokens in 300 ms" and "2,000
// tokens over 90 seconds".
const (
	shortOutput = 10
	longOutput  = 2000
)

// WorkloadOptions choose where request shapes and arrivals come from.
type WorkloadOptions struct {
	// TracePath is a CSV with the columns arrived_at, num_prefill_tokens
	// and num_decode_tokens. Absent (no such file): a synthetic trace with
	// the Azure conversation trace's length distribution.
	TracePath string
	Kind      string // KindTrace or KindExtreme
	Arrivals  string // ArrivalsPoisson or ArrivalsTrace
	// LongShare is the share of 2,000-token jobs in the extreme mix.
	LongShare float64
}

// Workload draws reproducible job lists from a trace.
type Workload struct {
	opts WorkloadOptions
	rows []gpusim.SimRequest
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
	w := &Workload{opts: o}
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
		w.rows[i].PromptTokens = min(w.rows[i].PromptTokens, maxPrompt)
	}
	return w, nil
}

// Name describes the workload for reports.
func (w *Workload) Name() string {
	if w.opts.Kind == KindExtreme {
		return fmt.Sprintf("extreme mix (%d and %d output tokens, %.0f%% long), %s arrivals", shortOutput, longOutput, 100*w.opts.LongShare, w.opts.Arrivals)
	}
	return fmt.Sprintf("trace lengths, %s arrivals", w.opts.Arrivals)
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
		r := w.rows[(start+i)%len(w.rows)]
		jobs[i] = Job{Prompt: r.PromptTokens, Output: r.OutputTokens}
		if w.opts.Kind == KindExtreme {
			jobs[i].Output = shortOutput
			if rng.Float64() < w.opts.LongShare {
				jobs[i].Output = longOutput
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
