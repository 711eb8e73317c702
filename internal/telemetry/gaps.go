package telemetry

import (
	"maps"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llm-router/llm-router/state"
)

// The inter-token signal of adaptive caps. A goodput SLO bounds each
// request's p99 gap between tokens, and a GPU near its throughput limit
// breaks it while its mean gap, the router's own tokens/s average, still
// looks calm (docs/adaptive-caps.md, "The tail inter-token signal"). The
// engine knows every gap: vLLM's inter-token histogram. The monitor reads
// the share of gaps over the SLO in windows of gapWindow gaps, from the
// histogram's counts at the window's ends, and the learner cuts a limit
// whose share is over its budget.

// itlNames are vLLM's inter-token histograms, newest name first
// (time_per_output_token_seconds before vLLM renamed it).
var itlNames = []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}

// gapWindow is the gaps a window needs. Small, so that a limit learns
// within seconds (an A40 holding 15 streams makes 500 gaps in about 1.3 s);
// at the default budget of one slow gap in 2,000, one slow gap in a window
// is four times it: the signal cuts on any slow gap, harder the more
// there are. Since a request fails a p99 gap SLO on one or two slow gaps,
// that is the right sensitivity. A window of 2,000 (one slow gap at the
// budget) learned too slowly for the benchmark's 30-second runs.
const gapWindow = 500

// Histogram is a cumulative Prometheus histogram: Counts[i] observations
// at or below Bounds[i], Count in all.
type Histogram struct {
	Bounds, Counts []float64
	Count          float64
}

// Over is the observations above the largest bucket bound at or below
// limit (seconds), so that a limit between two bounds counts the gaps
// between them as over it; ok is false when no bound is at or below limit.
func (h *Histogram) Over(limit float64) (over float64, ok bool) {
	// A bound a rounding away from the limit is the limit's edge.
	i, found := slices.BinarySearch(h.Bounds, limit*(1+1e-9))
	if !found {
		i--
	}
	if i < 0 {
		return 0, false
	}
	return h.Count - h.Counts[i], true
}

// readHistogram sums the series of the first family of names present.
func readHistogram(fams map[string]*dto.MetricFamily, names []string) *Histogram {
	for _, name := range names {
		f, ok := fams[name]
		if !ok {
			continue
		}
		sums := map[float64]float64{}
		h := &Histogram{}
		for _, m := range f.GetMetric() {
			mh := m.GetHistogram()
			if mh == nil {
				continue
			}
			h.Count += float64(mh.GetSampleCount())
			for _, b := range mh.GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					sums[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
			}
		}
		if len(sums) == 0 {
			continue
		}
		for _, le := range slices.Sorted(maps.Keys(sums)) {
			h.Bounds = append(h.Bounds, le)
			h.Counts = append(h.Counts, sums[le])
		}
		return h
	}
	return nil
}

// gapCheck keeps the window of inter-token gaps: with the engine's counts
// now (gaps in all, slow over the SLO), it opens a window where none is
// open or the counts went back (the engine restarted), and closes one that
// holds gapWindow gaps, setting the share of them that were slow. A window
// still open leaves the marks as stored.
func gapCheck(prev state.Telemetry, tm *state.Telemetry, gaps, slow float64, at time.Time) {
	mark := func() {
		tm.GapMark = state.Sample{Value: gaps, At: at}
		tm.SlowMark = state.Sample{Value: slow, At: at}
	}
	if prev.GapMark.At.IsZero() || gaps < prev.GapMark.Value || slow < prev.SlowMark.Value {
		mark()
		return
	}
	n := gaps - prev.GapMark.Value
	if n < gapWindow {
		return
	}
	tm.SlowShare = state.Sample{Value: (slow - prev.SlowMark.Value) / n, At: at}
	mark()
}
