package stats

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/llm-router/llm-router/benchmark/loadgen"
)

// SLO is what a request must meet to count towards goodput.
type SLO struct {
	TTFT time.Duration `json:"ttft"`
	// ITL bounds the request's own 99th-percentile inter-token gap.
	ITL time.Duration `json:"itl_p99"`
}

// DefaultSLO is a 2 s TTFT and a 100 ms p99 inter-token latency.
func DefaultSLO() SLO { return SLO{TTFT: 2 * time.Second, ITL: 100 * time.Millisecond} }

// Good reports whether r succeeded within the SLO. A request with fewer
// than two tokens has no gap and meets the ITL bound trivially.
func (s SLO) Good(r loadgen.Result) bool {
	if !r.OK() || r.TTFT > s.TTFT {
		return false
	}
	return len(r.ITLs) == 0 || Percentile(r.ITLs, 99) <= s.ITL
}

// Summary is one configuration at one load: what users saw. Times are
// milliseconds (of GPU time when the fleet was slowed down), rates per
// second of GPU time.
type Summary struct {
	Setup string  `json:"setup"`
	Load  float64 `json:"load"` // share of the measured capacity
	Rate  float64 `json:"offered_rate"`

	Requests int `json:"requests"`
	OK       int `json:"ok"`
	// Unfinished requests were still running when the run was cut; they
	// are neither errors nor good, and their latencies are lower bounds.
	Unfinished int     `json:"unfinished"`
	Errors     int     `json:"errors"`
	ErrorRate  float64 `json:"error_rate"`

	TTFTP50 float64 `json:"ttft_p50_ms"`
	TTFTP95 float64 `json:"ttft_p95_ms"`
	TTFTP99 float64 `json:"ttft_p99_ms"`
	E2EP50  float64 `json:"e2e_p50_ms"`
	E2EP99  float64 `json:"e2e_p99_ms"`
	ITLP99  float64 `json:"itl_p99_ms"`
	// TPSMean and TPSCV are the mean and coefficient of variation, across
	// requests, of each request's decode rate (tokens/s after the first).
	TPSMean float64 `json:"tokens_per_s_mean"`
	TPSCV   float64 `json:"tokens_per_s_cv"`
	// Throughput is the requests that completed per second of the span
	// over which they arrived: the offered rate when every request
	// completes, less when some fail or are still running at the end.
	// Goodput counts only those within the SLO.
	Throughput   float64 `json:"throughput"`
	Goodput      float64 `json:"goodput"`
	GoodFraction float64 `json:"good_fraction"`
	// PerWorker counts the successful requests each worker served.
	PerWorker map[string]int `json:"per_worker"`
	// ErrorKinds counts errors by kind ("http 429", a client error), for
	// diagnosis.
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	// LowerBounds names the percentiles that fell on an unfinished request:
	// the true value is at least the one shown.
	LowerBounds []string `json:"lower_bounds,omitempty"`
}

// Summarize computes the summary of rs under slo.
func Summarize(rs []loadgen.Result, slo SLO) Summary {
	s := Summary{Requests: len(rs), PerWorker: map[string]int{}}
	var ttft, e2e []bound
	var itl []time.Duration
	var tps []float64
	first, last := time.Duration(-1), time.Duration(0) // arrivals
	good := 0
	for _, r := range rs {
		if first < 0 || r.Start < first {
			first = r.Start
		}
		last = max(last, r.Start)
		switch {
		case r.Cut:
			s.Unfinished++
			ttft = append(ttft, bound{r.TTFT, r.Tokens == 0})
			if r.Tokens == 0 {
				ttft[len(ttft)-1].d = r.Latency
			}
			e2e = append(e2e, bound{r.Latency, true})
			continue
		case !r.OK():
			s.Errors++
			if s.ErrorKinds == nil {
				s.ErrorKinds = map[string]int{}
			}
			s.ErrorKinds[errorKind(r)]++
			continue
		}
		s.OK++
		ttft = append(ttft, bound{r.TTFT, false})
		e2e = append(e2e, bound{r.Latency, false})
		itl = append(itl, r.ITLs...)
		if v := r.TokensPerSecond(); v > 0 {
			tps = append(tps, v)
		}
		if r.Node != "" {
			s.PerWorker[r.Node]++
		}
		if slo.Good(r) {
			good++
		}
	}
	if s.Requests > 0 {
		s.ErrorRate = float64(s.Errors) / float64(s.Requests)
		s.GoodFraction = float64(good) / float64(s.Requests)
	}
	for _, p := range []struct {
		name string
		dst  *float64
		src  []bound
		pct  float64
	}{
		{"ttft_p50_ms", &s.TTFTP50, ttft, 50},
		{"ttft_p95_ms", &s.TTFTP95, ttft, 95},
		{"ttft_p99_ms", &s.TTFTP99, ttft, 99},
		{"e2e_p50_ms", &s.E2EP50, e2e, 50},
		{"e2e_p99_ms", &s.E2EP99, e2e, 99},
	} {
		v, lower := boundPercentile(p.src, p.pct)
		*p.dst = Ms(v)
		if lower {
			s.LowerBounds = append(s.LowerBounds, p.name)
		}
	}
	s.ITLP99 = Ms(Percentile(itl, 99))
	s.TPSMean, s.TPSCV = MeanCV(tps)
	// n arrivals span n-1 gaps: scale so that n completions over the span
	// give back the arrival rate.
	if span := (last - first).Seconds(); s.Requests > 1 && span > 0 {
		perReq := float64(s.Requests-1) / float64(s.Requests) / span
		s.Throughput = float64(s.OK) * perReq
		s.Goodput = float64(good) * perReq
	}
	return s
}

// bound is a latency, or when lower is set a lower bound of one (the
// request was cut before it got there).
type bound struct {
	d     time.Duration
	lower bool
}

// boundPercentile is Percentile over values some of which are lower
// bounds. Lower bounds sort after every exact value (the true values are
// unknown, and may be anything above the bound), so the result is a lower
// bound, flagged, whenever the rank falls among them.
func boundPercentile(bs []bound, p float64) (time.Duration, bool) {
	if len(bs) == 0 {
		return 0, false
	}
	s := slices.Clone(bs)
	slices.SortFunc(s, func(a, b bound) int {
		if a.lower != b.lower {
			if a.lower {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.d, b.d)
	})
	b := s[nearestRank(len(s), p)-1]
	return b.d, b.lower
}

// errorKind groups a failed result: its HTTP status, or the client error.
func errorKind(r loadgen.Result) string {
	if r.Status != 0 && r.Status != 200 {
		return "http " + strconv.Itoa(r.Status)
	}
	if len(r.Err) > 40 {
		return r.Err[:40]
	}
	return r.Err
}

// SortedDurations returns a sorted copy of ds, for CDFs.
func SortedDurations(ds []time.Duration) []time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s
}
