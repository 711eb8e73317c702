package scheduler

import (
	"cmp"
	"slices"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// view is an immutable, indexed copy of a snapshot, ready for scoring.
type view struct {
	snap    state.Snapshot
	stale   time.Duration // scraped values older than this are unknown
	workers []scoring.Worker
	updated []updatedAt // per worker, when each average was last fed
	tele    []state.Telemetry
	index   map[string]int
	byModel map[string][]int
	byAddr  map[string]string
	models  []string
	// adapters are the LoRA adapters the workers serve.
	adapters adapterIndex
}

type updatedAt struct {
	latency, ttft, tps time.Time
}

// fleetDefaults fill what a worker's spec leaves out.
type fleetDefaults struct {
	kvBlocks    int
	prefillRate float64
}

func newView(snap state.Snapshot, zone, region string, stale time.Duration, joining map[string]bool, def fleetDefaults, catalog []state.Adapter, now time.Time) *view {
	v := &view{
		snap:    snap,
		stale:   stale,
		index:   make(map[string]int, len(snap.Workers)),
		byModel: map[string][]int{},
		byAddr:  make(map[string]string, len(snap.Workers)),
	}
	models := fitLatency(snap, now)
	v.adapters = indexAdapters(snap, catalog)
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
			Joining:        joining[w.Spec.ID],
			MaxConcurrency: state.CapWith(w.Spec.MaxConcurrency, w.Limit.Value), // a learned limit lowers it
			Active:         w.InFlight,
			Distance:       scoring.Distance(w.Spec.Zone, w.Spec.Region, zone, region),
			Latency:        scoring.Average{Value: w.Stats.Latency.Value, Samples: w.Stats.Latency.Samples},
			TTFT:           scoring.Average{Value: w.Stats.TTFT.Value, Samples: w.Stats.TTFT.Samples},
			TokensPerSec:   scoring.Average{Value: w.Stats.TokensPerSec.Value, Samples: w.Stats.TokensPerSec.Samples},
			KVBlocks:       kvBlocks(w, def),
			PrefixTrust:    prefixTrust(w),
			PrefillRate:    cmp.Or(w.Spec.PrefillTokensPerSecond, def.prefillRate),
			PrefillTokens:  w.PrefillTokens,
			DecodeTokens:   w.DecodeTokens,
			AheadTokens:    w.AheadTokens,
			LatencyModels:  models[i],
			Adapters:       v.adapters.byWorker[i],
			MaxLoras:       state.AdapterSlots(w.Spec, w.Telemetry.Adapters),
		})
		v.updated = append(v.updated, updatedAt{w.Stats.Latency.Updated, w.Stats.TTFT.Updated, w.Stats.TokensPerSec.Updated})
		v.tele = append(v.tele, w.Telemetry)
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
		// Worker-reported values are dated; past the staleness bound they
		// are unknown, never read as an idle zero.
		t := v.tele[j]
		w.Queue = signal(t.Waiting, now, v.stale)
		w.KVPressure = signal(t.KVUsage, now, v.stale)
		w.GPUUtil = signal(t.GPUUtil, now, v.stale)
		out[i] = w
	}
	return out
}

// within keeps the workers whose address is in addrs.
func (v *view) within(ws []scoring.Worker, addrs []string) []scoring.Worker {
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if id, ok := v.byAddr[a]; ok {
			keep[id] = true
		}
	}
	return slices.DeleteFunc(ws, func(w scoring.Worker) bool { return !keep[w.ID] })
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

func signal(s state.Sample, now time.Time, stale time.Duration) scoring.Signal {
	if stale <= 0 || !s.Known(now, stale) {
		return scoring.Signal{}
	}
	return scoring.Known(s.Value)
}
