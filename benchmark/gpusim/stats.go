package gpusim

import (
	"slices"
	"strconv"
	"time"
)

// Histogram buckets, in seconds, chosen to resolve both a fast H100 prefill
// and a saturated queue.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}
	e2eBuckets  = []float64{0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 60, 120, 240, 480, 960}
	// itlBuckets are vLLM's for its inter-token latency histogram: a
	// router reading the share of gaps over an SLO needs the SLO's edge
	// (0.1 s) where vLLM puts it.
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	// xferBuckets and xferByteBuckets are vLLM's for its NIXL transfer
	// histograms (duration; bytes from 2 KiB to 8 GiB).
	xferBuckets     = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 5}
	xferByteBuckets = func() []float64 {
		var out []float64
		for i := 1; i < 25; i += 2 {
			out = append(out, float64(uint64(1)<<(10+i)))
		}
		return out
	}()
)

// histogram is a cumulative-on-render Prometheus histogram.
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) { h.observeN(v, 1) }

// observeN records n observations of v.
func (h *histogram) observeN(v float64, n uint64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i] += n
	h.sum += v * float64(n)
	h.count += n
}

func (h histogram) clone() histogram {
	h.counts = slices.Clone(h.counts)
	return h
}

// modelStats are the per-model counters behind /metrics.
type modelStats struct {
	Running, Waiting int // filled in by snapshot
	PromptTokens     uint64
	GenerationTokens uint64
	Preemptions      uint64
	// PrefixQueries and PrefixHits are prompt tokens looked up in and
	// found in the prefix cache, counted at a request's first admission.
	PrefixQueries uint64
	PrefixHits    uint64
	SuccessLength uint64
	SuccessStop   uint64
	TTFT, E2E     histogram
	// ITL holds the gaps between a request's consecutive tokens.
	ITL histogram
	// XferTime and XferBytes are the KV loads from prefill workers
	// (disagg.go); FailedTransfers counts the loads that could not start
	// (the prefill worker unreachable), whose prompts were recomputed.
	XferTime, XferBytes histogram
	FailedTransfers     uint64
}

func newModelStats() *modelStats { return newScaledModelStats(1) }

// newScaledModelStats are a GPU's counters whose histogram buckets are
// vLLM's times scale (the slowdown it started with): a fleet slowed down
// by a common factor to fit a benchmark on a small machine reports its
// latencies in the same buckets relative to its speed, so a threshold
// scaled by the same factor (a router's inter-token SLO) meets a bucket
// edge where it would on the real GPU.
func newScaledModelStats(scale float64) *modelStats {
	return &modelStats{
		TTFT: newHistogram(scaled(ttftBuckets, scale)),
		E2E:  newHistogram(scaled(e2eBuckets, scale)),
		ITL:  newHistogram(scaled(itlBuckets, scale)),

		XferTime:  newHistogram(scaled(xferBuckets, scale)),
		XferBytes: newHistogram(xferByteBuckets),
	}
}

func scaled(bounds []float64, scale float64) []float64 {
	if scale == 1 {
		return bounds
	}
	out := make([]float64, len(bounds))
	for i, b := range bounds {
		// to 12 digits, so that 0.1 × 0.15 is the 0.015 a scraper expects
		out[i], _ = strconv.ParseFloat(strconv.FormatFloat(b*scale, 'g', 12, 64), 64)
	}
	return out
}

func (m *modelStats) clone() modelStats {
	c := *m
	c.TTFT = m.TTFT.clone()
	c.E2E = m.E2E.clone()
	c.ITL = m.ITL.clone()
	c.XferTime = m.XferTime.clone()
	c.XferBytes = m.XferBytes.clone()
	return c
}

// rateWindow counts events in one-second buckets to give a recent rate.
type rateWindow struct {
	sec    [16]int64
	counts [16]uint64
}

const rateSpan = 5 // seconds averaged by rate

func (w *rateWindow) add(now time.Duration, n int) {
	s := int64(now / time.Second)
	i := s % int64(len(w.sec))
	if w.sec[i] != s {
		w.sec[i], w.counts[i] = s, 0
	}
	w.counts[i] += uint64(n)
}

// rate is the mean per second over the last rateSpan whole seconds before
// now's second.
func (w *rateWindow) rate(now time.Duration) float64 {
	cur := int64(now / time.Second)
	var total uint64
	for i, s := range w.sec {
		if s < cur && s >= cur-rateSpan {
			total += w.counts[i]
		}
	}
	return float64(total) / rateSpan
}
