package gpusim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// LoadTrace reads a request trace in the vidur CSV format (columns
// arrived_at in seconds, num_prefill_tokens, num_decode_tokens, found by
// header name), keeping at most limit rows (0 = all). Output lengths below
// one token are raised to one.
func LoadTrace(r io.Reader, limit int) ([]SimRequest, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read trace header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	idx := make([]int, 3)
	for i, name := range []string{"arrived_at", "num_prefill_tokens", "num_decode_tokens"} {
		j, ok := col[name]
		if !ok {
			return nil, fmt.Errorf("trace has no %s column", name)
		}
		idx[i] = j
	}
	var out []SimRequest
	for line := 2; limit == 0 || len(out) < limit; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		at, err1 := strconv.ParseFloat(rec[idx[0]], 64)
		p, err2 := strconv.Atoi(rec[idx[1]])
		d, err3 := strconv.Atoi(rec[idx[2]])
		if err := errors.Join(err1, err2, err3); err != nil || at < 0 || p < 1 {
			return nil, fmt.Errorf("trace line %d: bad row %v", line, rec)
		}
		out = append(out, SimRequest{
			Arrival:      time.Duration(at * float64(time.Second)),
			PromptTokens: p, OutputTokens: max(d, 1),
		})
	}
	if len(out) < 2 {
		return nil, errors.New("trace has fewer than 2 requests")
	}
	return out, nil
}

// LoadTraceFile is LoadTrace on a file.
func LoadTraceFile(path string, limit int) ([]SimRequest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return LoadTrace(f, limit)
}

// Rescale returns reqs with their inter-arrival times scaled so that the
// mean arrival rate is rate requests per second; the shape of the arrival
// process (its bursts) is kept. reqs must be sorted by arrival.
func Rescale(reqs []SimRequest, rate float64) []SimRequest {
	out := slices.Clone(reqs)
	first, last := reqs[0].Arrival, reqs[len(reqs)-1].Arrival
	span := (last - first).Seconds()
	if span <= 0 || rate <= 0 {
		return out
	}
	scale := float64(len(reqs)-1) / rate / span
	for i := range out {
		out[i].Arrival = time.Duration(float64(reqs[i].Arrival-first) * scale)
	}
	return out
}

// RateResult summarises one replay at one request rate.
type RateResult struct {
	Rate        float64
	P50TTFT     time.Duration
	P99TTFT     time.Duration
	P50E2E      time.Duration
	Preemptions uint64
	// Throughput is completed requests per second of simulated time.
	Throughput  float64
	Sustainable bool
}

// ValidateOptions configures a saturation search.
type ValidateOptions struct {
	// TTFTBound is the median TTFT above which a rate is unsustainable.
	TTFTBound time.Duration
	// Step is the coarse rate increment of the scan, from Step upwards;
	// Tolerance the precision of the bisection that follows.
	Step, Tolerance, MaxRate float64
}

// DefaultValidateOptions returns a 2 s TTFT bound, a 0.5 req/s scan up to
// 40 req/s and a 0.05 req/s final precision.
func DefaultValidateOptions() ValidateOptions {
	return ValidateOptions{TTFTBound: 2 * time.Second, Step: 0.5, Tolerance: 0.05, MaxRate: 40}
}

// Validation is the outcome of FindSaturation.
type Validation struct {
	// SaturationRate is the highest sustainable rate found (req/s).
	SaturationRate float64
	// Runs lists every replay, in the order run.
	Runs []RateResult
}

// ReplayAt replays reqs rescaled to rate on one GPU of cfg in virtual time.
// A rate is sustainable when the median TTFT over the replay is at most
// bound.
func ReplayAt(cfg Config, reqs []SimRequest, rate float64, bound time.Duration) (RateResult, error) {
	res, st, err := Simulate(cfg, Rescale(reqs, rate))
	if err != nil {
		return RateResult{}, fmt.Errorf("replay at %.2f req/s: %w", rate, err)
	}
	var ttft, e2e []time.Duration
	var end time.Duration
	for _, r := range res {
		if r.Rejected {
			continue
		}
		ttft = append(ttft, r.TTFT())
		e2e = append(e2e, r.Done-r.Arrival)
		end = max(end, r.Done)
	}
	rr := RateResult{
		Rate: rate, P50TTFT: quantile(ttft, 0.5), P99TTFT: quantile(ttft, 0.99),
		P50E2E: quantile(e2e, 0.5), Preemptions: st.Preemptions,
	}
	if end > 0 {
		rr.Throughput = float64(len(ttft)) / end.Seconds()
	}
	rr.Sustainable = len(ttft) > 0 && rr.P50TTFT <= bound
	return rr, nil
}

// FindSaturation finds the saturation rate of one GPU of cfg on reqs.
//
// Definition: replaying the trace with its inter-arrival times rescaled to a
// mean of λ req/s, λ is sustainable when the median TTFT of the replayed
// requests is at most opts.TTFTBound (2 s by default). Below capacity the
// median TTFT is a prefill plus a short queue wait (about 0.1 s on an
// A100); above it the backlog grows for as long as the trace lasts, so the
// median TTFT grows with the trace length (tens of seconds for 2,000
// requests) and the bound cleanly separates the two. The saturation rate is
// the highest sustainable λ: a scan in opts.Step increments finds the first
// unsustainable rate, then bisection narrows the boundary to opts.Tolerance.
func FindSaturation(cfg Config, reqs []SimRequest, opts ValidateOptions) (Validation, error) {
	var v Validation
	run := func(rate float64) (bool, error) {
		rr, err := ReplayAt(cfg, reqs, rate, opts.TTFTBound)
		if err != nil {
			return false, err
		}
		v.Runs = append(v.Runs, rr)
		return rr.Sustainable, nil
	}
	lo, hi := 0.0, 0.0
	for rate := opts.Step; rate <= opts.MaxRate+1e-9; rate += opts.Step {
		ok, err := run(rate)
		if err != nil {
			return v, err
		}
		if !ok {
			hi = rate
			break
		}
		lo = rate
	}
	if hi == 0 {
		v.SaturationRate = lo
		return v, fmt.Errorf("still sustainable at %.2f req/s: raise MaxRate", lo)
	}
	for hi-lo > opts.Tolerance {
		mid := (lo + hi) / 2
		ok, err := run(mid)
		if err != nil {
			return v, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	v.SaturationRate = lo
	return v, nil
}

// quantile is the nearest-rank q-quantile of ds (0 when empty).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
