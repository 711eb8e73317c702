package telemetry

import (
	"context"
	"math"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/state"
)

// The prefix-cache check. The router's prefix index is routing history:
// it predicts which prompt blocks each worker's engine holds. Where the
// engine reports its real prefix-cache hits (vLLM's
// vllm:prefix_cache_hits_total, in tokens), the monitor compares them,
// window by window, with the hits the index predicted for the claims the
// worker won (state.Worker.PredictedHitTokens, counted by the claim): their
// ratio, smoothed, scales the worker's prefix term, so a worker whose
// engine evicts sooner than its index does is not credited with hits it no
// longer has. The engine's cache size (vllm:cache_config_info's
// num_gpu_blocks) bounds the worker's index in place of the configured
// estimate, and a restarted engine (its process_start_time_seconds moved,
// or its hit counter went back) has its index emptied.

// hitWindowTokens is the predicted hit tokens a comparison window needs:
// fewer say little about the ratio.
const hitWindowTokens = 2048

// ratioSmoothing weighs each window's ratio into the smoothed one.
const ratioSmoothing = 0.5

// maxHitRatio bounds one window's ratio: the index matches to within an
// index stride, so the engine may hit a little more than predicted, and a
// window's lag between claim and admission must not swing it far.
const maxHitRatio = 2

// The vLLM metrics the check reads: hit counters (current, older),
// process start, cache config.
var (
	hitNames         = []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}
	startName        = "process_start_time_seconds"
	cacheConfigName  = "vllm:cache_config_info"
	engineCacheNames = append([]string{startName, cacheConfigName}, hitNames...)
)

// readEngineCache reads the vLLM prefix-cache figures into r.
func readEngineCache(format string, fams map[string]*dto.MetricFamily, r *Reading) {
	if format != FormatVLLM {
		return
	}
	r.PrefixHits = firstOf(fams, hitNames, sum)
	r.StartTime = firstOf(fams, []string{startName}, maxOf)
	if f, ok := fams[cacheConfigName]; ok {
		for _, m := range f.GetMetric() {
			var blocks, size float64
			for _, l := range m.GetLabel() {
				v, err := strconv.ParseFloat(l.GetValue(), 64)
				if err != nil {
					continue
				}
				switch l.GetName() {
				case "num_gpu_blocks":
					blocks = v
				case "block_size":
					size = v
				}
			}
			if blocks > 0 && size > 0 {
				kv := math.Floor(blocks * size / state.BlockTokens)
				r.KVBlocks = &kv
				break
			}
		}
	}
}

// prefixCheck compares one scrape's engine figures with what the worker
// showed before (prev, from the snapshot) and fills the check's samples of
// tm. It reports whether the engine restarted since the last scrape.
func prefixCheck(prev state.Worker, tm *state.Telemetry, at time.Time) (restarted bool) {
	old := prev.Telemetry
	if tm.StartTime.At.IsZero() && tm.PrefixHits.At.IsZero() {
		return false
	}
	if !tm.StartTime.At.IsZero() && !old.StartTime.At.IsZero() && math.Abs(tm.StartTime.Value-old.StartTime.Value) > 1e-3 {
		restarted = true
	}
	if !tm.PrefixHits.At.IsZero() && !old.PrefixHits.At.IsZero() && tm.PrefixHits.Value < old.PrefixHits.Value {
		restarted = true // a counter that went back: the process started again
	}
	if tm.PrefixHits.At.IsZero() {
		return restarted
	}
	predicted := float64(prev.PredictedHitTokens)
	mark := func() {
		tm.HitMark = state.Sample{Value: tm.PrefixHits.Value, At: at}
		tm.PredictedMark = state.Sample{Value: predicted, At: at}
	}
	if restarted || old.HitMark.At.IsZero() || predicted < old.PredictedMark.Value {
		mark() // a new window (the predicted count started again with the worker)
		return restarted
	}
	dPred := predicted - old.PredictedMark.Value
	if dPred < hitWindowTokens {
		return false // the window goes on: the marks stay as stored
	}
	r := min(maxHitRatio, max(0, (tm.PrefixHits.Value-old.HitMark.Value)/dPred))
	if !old.HitRatio.At.IsZero() {
		r = ratioSmoothing*r + (1-ratioSmoothing)*old.HitRatio.Value
	}
	tm.HitRatio = state.Sample{Value: r, At: at}
	mark()
	return false
}

// forgetRestarted empties the prefix index of each restarted worker.
func (m *Monitor) forgetRestarted(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := m.store.ForgetPrefixes(ctx, id); err != nil {
			m.log.Warn("forget a restarted worker's prefix index", zap.String("worker", id), zap.Error(err))
			continue
		}
		m.log.Info("worker restarted: its prefix index is emptied", zap.String("worker", id))
	}
}
