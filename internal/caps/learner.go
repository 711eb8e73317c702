package caps

import (
	"context"
	"fmt"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Learner updates the learned limits of the workers its replica monitors.
type Learner struct {
	store   state.LimitWriter
	params  Params
	enabled bool
	now     func() time.Time
}

// NewLearner returns a learner writing to store. Disabled, it only lifts
// limits left from an earlier run with adaptive caps on, so that switching
// them off restores the configured caps at once on every replica. now may
// be nil (time.Now).
func NewLearner(store state.LimitWriter, p Params, enabled bool, now func() time.Time) *Learner {
	if now == nil {
		now = time.Now
	}
	return &Learner{store: store, params: p, enabled: enabled, now: now}
}

// Learn computes the next limit of every worker of snap named in mine and
// writes those that changed, in one store call.
func (l *Learner) Learn(ctx context.Context, snap state.Snapshot, mine []string) error {
	want := make(map[string]bool, len(mine))
	for _, id := range mine {
		want[id] = true
	}
	now := l.now()
	out := map[string]state.Limit{}
	for _, w := range snap.Workers {
		if !want[w.Spec.ID] {
			continue
		}
		if !l.enabled {
			if !w.Limit.IsZero() {
				out[w.Spec.ID] = state.Limit{}
			}
			continue
		}
		next, changed := l.params.Next(FromState(w.Limit), Observation{
			Cap: w.Spec.MaxConcurrency, InFlight: w.InFlight, Tokens: w.PrefillTokens + w.DecodeTokens,
			TTFT: w.Stats.TTFT, TokensPerSec: w.Stats.TokensPerSec,
			Waiting: w.Telemetry.Waiting, Running: w.Telemetry.Running,
			SlowShare: w.Telemetry.SlowShare,
		}, now)
		if changed {
			out[w.Spec.ID] = next.State()
		}
	}
	if len(out) == 0 {
		return nil
	}
	if err := l.store.PutLimits(ctx, out); err != nil {
		return fmt.Errorf("store learned limits: %w", err)
	}
	return nil
}
