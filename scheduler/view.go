package scheduler

import (
	"slices"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// view is an immutable, indexed copy of a snapshot, ready for scoring.
type view struct {
	snap    state.Snapshot
	workers []scoring.Worker
	updated []updatedAt // per worker, when each average was last fed
	index   map[string]int
	byModel map[string][]int
	byAddr  map[string]string
	models  []string
}

type updatedAt struct {
	latency, ttft, tps time.Time
}

func newView(snap state.Snapshot, zone, region string) *view {
	v := &view{
		snap:    snap,
		index:   make(map[string]int, len(snap.Workers)),
		byModel: map[string][]int{},
		byAddr:  make(map[string]string, len(snap.Workers)),
	}
	for i, w := range snap.Workers {
		v.index[w.Spec.ID] = i
		v.byAddr[w.Spec.Address] = w.Spec.ID
		for _, m := range w.Spec.Models {
			if _, ok := v.byModel[m]; !ok {
				v.models = append(v.models, m)
			}
			v.byModel[m] = append(v.byModel[m], i)
		}
		v.workers = append(v.workers, scoring.Worker{
			ID:             w.Spec.ID,
			Models:         w.Spec.Models,
			Health:         scoring.Health(w.Health),
			Draining:       w.Draining,
			MaxConcurrency: w.Spec.MaxConcurrency,
			Active:         w.InFlight,
			Distance:       scoring.Distance(w.Spec.Zone, w.Spec.Region, zone, region),
			Latency:        scoring.Average{Value: w.Stats.Latency.Value, Samples: w.Stats.Latency.Samples},
			TTFT:           scoring.Average{Value: w.Stats.TTFT.Value, Samples: w.Stats.TTFT.Samples},
			TokensPerSec:   scoring.Average{Value: w.Stats.TokensPerSec.Value, Samples: w.Stats.TokensPerSec.Samples},
		})
		v.updated = append(v.updated, updatedAt{w.Stats.Latency.Updated, w.Stats.TTFT.Updated, w.Stats.TokensPerSec.Updated})
	}
	slices.Sort(v.models)
	return v
}

// candidates copies the workers serving model with their ages as of now.
func (v *view) candidates(model string, now time.Time) []scoring.Worker {
	idx := v.byModel[model]
	out := make([]scoring.Worker, len(idx))
	for i, j := range idx {
		w := v.workers[j]
		u := v.updated[j]
		w.Latency.Age = age(now, u.latency)
		w.TTFT.Age = age(now, u.ttft)
		w.TokensPerSec.Age = age(now, u.tps)
		out[i] = w
	}
	return out
}

func age(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	if d := now.Sub(t); d > 0 {
		return d
	}
	return 0
}
