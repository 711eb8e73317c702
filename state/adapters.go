package state

import (
	"slices"
	"time"

	"github.com/llm-router/llm-router/scoring"
)

// Adapter is a LoRA adapter of a base model: a request naming it as its
// model runs on a worker serving Base, with the adapter in one of the
// engine's slots. Path is what the engine loads it from (vLLM's
// lora_path), needed only when the router loads adapters (lora.manage).
type Adapter struct {
	Name string `json:"name"`
	Base string `json:"base"`
	Path string `json:"path,omitempty"`
}

// AdapterPlacement is one adapter a worker holds as the store records it:
// placed by the claims that chose the worker for it (or reported by its
// engine), with the requests running on it (all replicas) and when a
// claim last used it. The least recently used idle one is the first
// evicted.
type AdapterPlacement struct {
	Name   string    `json:"name"`
	Active int       `json:"active"`
	Used   time.Time `json:"used"`
}

// AdapterReport is what a worker's engine said of its adapters when last
// scraped: vLLM's lora_requests_info gauge (the adapters with running and
// with waiting requests, and max_lora) and the adapters its /v1/models
// lists with their parent. At zero: never reported.
type AdapterReport struct {
	Running  []string  `json:"running,omitempty"`
	Waiting  []string  `json:"waiting,omitempty"`
	MaxLoras int       `json:"max_loras,omitempty"`
	Listed   []Adapter `json:"listed,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// Known reports whether the engine reported its adapters at all.
func (r AdapterReport) Known() bool { return !r.At.IsZero() }

// Holds reports whether the engine's report names adapter a: running,
// waiting or listed.
func (r AdapterReport) Holds(a string) bool {
	if slices.Contains(r.Running, a) || slices.Contains(r.Waiting, a) {
		return true
	}
	for _, l := range r.Listed {
		if l.Name == a {
			return true
		}
	}
	return false
}

// AdapterSlots is the worker's adapter slots: its spec's max_loras, else
// what its engine reported, else scoring.DefaultMaxLoras.
func AdapterSlots(spec WorkerSpec, r AdapterReport) int {
	switch {
	case spec.MaxLoras > 0:
		return spec.MaxLoras
	case r.MaxLoras > 0:
		return r.MaxLoras
	}
	return scoring.DefaultMaxLoras
}

// PlaceAdapter is the placement step both stores run for a claim's
// winner, on the worker's placements ps (returned in a new slice): the
// adapter gains a running request and is used now; when that makes more
// placements than slots, the least recently used with nothing running is
// dropped, and named in evicted. With every placement running nothing is
// dropped: the engine queues the request for a slot.
func PlaceAdapter(ps []AdapterPlacement, adapter string, slots int, now time.Time) (out []AdapterPlacement, evicted string) {
	out = slices.Clone(ps)
	i := slices.IndexFunc(out, func(p AdapterPlacement) bool { return p.Name == adapter })
	if i < 0 {
		out = append(out, AdapterPlacement{Name: adapter})
		i = len(out) - 1
	}
	out[i].Active++
	out[i].Used = now.Truncate(time.Millisecond) // as the Redis store keeps it
	if slots <= 0 {
		slots = scoring.DefaultMaxLoras
	}
	if len(out) <= slots {
		return out, ""
	}
	victim := -1
	for j, p := range out {
		if p.Active == 0 && (victim < 0 || p.Used.Before(out[victim].Used) ||
			(p.Used.Equal(out[victim].Used) && p.Name < out[victim].Name)) {
			victim = j
		}
	}
	if victim < 0 {
		return out, ""
	}
	evicted = out[victim].Name
	return slices.Delete(out, victim, victim+1), evicted
}

// AdapterStateIn is the state of adapter on a worker with placements ps
// and slots slots.
func AdapterStateIn(ps []AdapterPlacement, adapter string, slots int) scoring.AdapterState {
	for _, p := range ps {
		if p.Name == adapter {
			return scoring.AdapterStateOf(true, p.Active, len(ps), slots)
		}
	}
	return scoring.AdapterStateOf(false, 0, len(ps), slots)
}

// SyncAdapters is what both stores do with a worker's placements ps when
// its engine's report r arrives (returned in a new slice): a placement
// with requests running stays (its claims own it until they end); an
// idle one the engine no longer holds is dropped (the engine unloaded
// it, or restarted); an adapter the engine runs or queues that no claim
// placed is added, idle, used at the report's time.
func SyncAdapters(ps []AdapterPlacement, r AdapterReport) []AdapterPlacement {
	if !r.Known() {
		return ps
	}
	out := make([]AdapterPlacement, 0, len(ps)+len(r.Running))
	for _, p := range ps {
		if p.Active > 0 || r.Holds(p.Name) {
			out = append(out, p)
		}
	}
	for _, a := range append(slices.Clone(r.Running), r.Waiting...) {
		if !slices.ContainsFunc(out, func(p AdapterPlacement) bool { return p.Name == a }) {
			out = append(out, AdapterPlacement{Name: a, Used: r.At.Truncate(time.Millisecond)})
		}
	}
	return out
}

// UnplaceAdapter is the release of a claim that placed adapter: one
// request fewer runs on it (the placement stays, idle, until evicted or
// dropped by the engine's report).
func UnplaceAdapter(ps []AdapterPlacement, adapter string) []AdapterPlacement {
	out := slices.Clone(ps)
	for i := range out {
		if out[i].Name == adapter && out[i].Active > 0 {
			out[i].Active--
		}
	}
	return out
}
