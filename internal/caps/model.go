package caps

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// Objectives are the latency objectives a model's limits are derived
// from: the TTFT and TPOT a request of the model gets when it asks for
// nothing else (0: none).
type Objectives struct {
	TTFT, TPOT time.Duration
}

// ModelBox derives each worker's concurrency limit from its latency model
// instead of a gradient: the largest number of requests in flight at which
// a request of the worker's usual size is still predicted to meet its
// model's objectives there (see ModelLimit). It runs where the gradient
// limiter would (the monitor's cycle, for the workers this replica
// monitors) and writes the same state.Limit, so the stores enforce it as
// they enforce a learned cap; the strategy predicted switches it on.
//
// The latency model's fast fit follows a change of speed within seconds
// (docs/latency-model.md), so a worker that slows has its limit cut at the
// next cycle after; one whose model is still unknown (the prior's figures,
// a slow GPU) gets no limit at all, so a new worker is never starved by
// the prior. A configured max_concurrency bounds the limit from above.
type ModelBox struct {
	store      state.LimitWriter
	objectives func(model string) Objectives
	now        func() time.Time
	cfg        latency.Config

	mu  sync.Mutex
	mix map[string]mix // worker → the size of its usual request
}

// mix is a worker's usual request, smoothed over the cycles it had
// requests in flight: tokens of prompt (uncached) and of output.
type mix struct{ prompt, output float64 }

// Bounds of a limit from the model.
const (
	// maxModelLimit is the highest limit searched: well above any engine's
	// batch, so that it only stands for "no limit needed".
	maxModelLimit = 1024
	// mixSmoothing is the weight of one cycle's in-flight mix.
	mixSmoothing = 0.2
	// defaultPrompt is a request's uncached prompt before a worker showed
	// any (output: scoring's default max_tokens).
	defaultPrompt = 512
	defaultOutput = 256
)

// NewModelLearner returns a ModelBox writing to store, with objectives
// giving each model's objectives. now may be nil (time.Now).
func NewModelLearner(store state.LimitWriter, objectives func(model string) Objectives, now func() time.Time) *ModelBox {
	if now == nil {
		now = time.Now
	}
	return &ModelBox{store: store, objectives: objectives, now: now, cfg: latency.DefaultConfig(), mix: map[string]mix{}}
}

// Learn computes the limit of every worker of snap named in mine and
// writes those that changed, in one store call.
func (b *ModelBox) Learn(ctx context.Context, snap state.Snapshot, mine []string) error {
	want := make(map[string]bool, len(mine))
	for _, id := range mine {
		want[id] = true
	}
	now := b.now()
	out := map[string]state.Limit{}
	for _, w := range snap.Workers {
		if !want[w.Spec.ID] {
			continue
		}
		m := b.observeMix(w)
		old := FromState(w.Limit)
		next := Limit{}
		if v, ok := b.limit(w, m, now); ok {
			next = settle(old, Limit{Value: v, Estimate: float64(v), Gradient: 1, Updated: now, Basis: BasisModel}, now)
		}
		stale := next.Value == 0 && !w.Limit.IsZero() || next.Value > 0 && old.Basis != BasisModel
		if next.Value != old.Value || old.Tokens != 0 || stale || pendingMoved(old, next) {
			out[w.Spec.ID] = next.State()
		}
	}
	b.forget(want)
	if len(out) == 0 {
		return nil
	}
	if err := b.store.PutLimits(ctx, out); err != nil {
		return fmt.Errorf("store model limits: %w", err)
	}
	return nil
}

// pendingMoved reports whether settle's memory of a move under way
// changed, which the store must keep though the limit did not.
func pendingMoved(old, next Limit) bool {
	return old.Pending != next.Pending || !old.PendingSince.Equal(next.PendingSince)
}

// forget drops the mix of workers this replica no longer monitors.
func (b *ModelBox) forget(mine map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.mix {
		if !mine[id] {
			delete(b.mix, id)
		}
	}
}

// observeMix folds the worker's in-flight requests into its usual size.
func (b *ModelBox) observeMix(w state.Worker) mix {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, seen := b.mix[w.Spec.ID]
	if w.InFlight > 0 && w.DecodeTokens > 0 {
		n := float64(w.InFlight)
		now := mix{prompt: float64(w.PrefillTokens) / n, output: float64(w.DecodeTokens) / n}
		if !seen {
			m = now
		} else {
			m.prompt += mixSmoothing * (now.prompt - m.prompt)
			m.output += mixSmoothing * (now.output - m.output)
		}
		b.mix[w.Spec.ID] = m
		seen = true
	}
	if !seen {
		m = mix{prompt: defaultPrompt, output: defaultOutput}
	}
	return m
}

// limit is the worker's limit for the tightest of its models (false: none,
// since no model of it is known or has objectives).
func (b *ModelBox) limit(w state.Worker, m mix, now time.Time) (int, bool) {
	best, any := maxModelLimit, false
	if w.Spec.MaxConcurrency > 0 {
		best = min(best, w.Spec.MaxConcurrency)
	}
	for _, name := range w.Spec.Models {
		st, ok := w.LatencyStats[name]
		if !ok || len(st.Sums) == 0 {
			continue
		}
		model := latency.Fit(b.cfg, st, latency.DefaultPrior(), now)
		if model.Unknown() {
			continue
		}
		if n, ok := ModelLimit(model, b.objectives(name), int(m.prompt), int(m.output), best); ok {
			best, any = n, true
		}
	}
	return best, any
}

// ModelLimit is the largest n in 1..upper such that a request of prompt
// uncached and output tokens, placed beside n−1 others like it, is
// predicted by model to meet obj: its TPOT (and so the others') at most
// obj.TPOT, and its TTFT with their decodes sharing the steps at most
// obj.TTFT. A worker that misses them even alone gets 1: it takes one
// request at a time, and the claim's ceiling refuses requests it would
// fail. False when obj has neither objective.
//
// Every coefficient of the model is non-negative, so the predictions grow
// with n and a bisection finds the largest n.
func ModelLimit(model latency.Model, obj Objectives, prompt, output, upper int) (int, bool) {
	if obj.TTFT <= 0 && obj.TPOT <= 0 {
		return 0, false
	}
	upper = max(upper, 1)
	meets := func(n int) bool {
		f := latency.Features{
			Running: n - 1, DecodeTokens: (n - 1) * output,
			Uncached: prompt, Output: output,
		}
		if obj.TPOT > 0 && model.PredictTPOT(f).Value > obj.TPOT {
			return false
		}
		return obj.TTFT <= 0 || model.PredictTTFT(f).Value <= obj.TTFT
	}
	lo, hi := 1, upper // meets(lo) is assumed: the floor
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if meets(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true
}
