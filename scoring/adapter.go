package scoring

import "math"

// LoRA adapters. A request may name a LoRA adapter of a base model as its
// model: it runs on a worker serving the base, in one of the engine's
// max_loras adapter slots. Where the adapter stands on a worker decides
// what the request costs there before its first token:
//
//	active  the adapter is placed there and serving requests: nothing
//	idle    placed there, nothing running on it: Idle (it may have been
//	        swapped out of the GPU since; a small price that keeps an
//	        adapter's requests together)
//	free    not placed, a slot is free: Load, the adapter's load time
//	evict   not placed, every slot taken: Load + Evict (another adapter
//	        is thrown out, and its next request pays a load in turn)
//
// The placement (which adapters a worker holds and how many requests run
// on each) is shared state: the store reads it inside the atomic claim,
// adds AdapterScore to the candidate's score, and records the winner's
// adapter in the same step, so two replicas never both see a cold adapter
// and load it on two workers. A popular adapter spreads by itself: once
// the wait behind the requests on its warm workers exceeds a load, a cold
// worker scores better; a rare one stays where it is placed.

// AdapterState is where a request's adapter stands on a candidate.
type AdapterState int

// Adapter states, best first. AdapterNone: the request names no adapter.
const (
	AdapterNone AdapterState = iota
	AdapterActive
	AdapterIdle
	AdapterFree
	AdapterEvict
)

var adapterStateNames = [...]string{"", "active", "idle", "free_slot", "evict"}

// String names the state for the decision log ("" for AdapterNone).
func (s AdapterState) String() string {
	if s < 0 || int(s) >= len(adapterStateNames) {
		return "unknown"
	}
	return adapterStateNames[s]
}

// Loads reports whether a request placed in this state makes the engine
// load the adapter.
func (s AdapterState) Loads() bool { return s == AdapterFree || s == AdapterEvict }

// DefaultMaxLoras is a worker's adapter slots when neither its spec nor
// its engine says (vLLM's --max-loras default).
const DefaultMaxLoras = 1

// AdapterStateOf is the state of an adapter on a worker holding placed
// adapters in slots slots (0: DefaultMaxLoras), where active requests run
// on it (placed: the worker holds it).
func AdapterStateOf(placed bool, active, held, slots int) AdapterState {
	if slots <= 0 {
		slots = DefaultMaxLoras
	}
	switch {
	case placed && active > 0:
		return AdapterActive
	case placed:
		return AdapterIdle
	case held < slots:
		return AdapterFree
	}
	return AdapterEvict
}

// AdapterWeights are what each adapter state adds to a candidate's score,
// in the strategy's units, and the worker's slots. The zero value adds
// nothing (a request with no adapter).
type AdapterWeights struct {
	Idle  float64 // placed, nothing running on it
	Load  float64 // not placed: the load before the first token
	Evict float64 // added to Load when every slot is taken
	// Slots is the worker's max_loras (0: DefaultMaxLoras).
	Slots int
}

// AdapterScore is what state s adds under w; the stores add exactly this
// (claim.lua mirrors it).
func AdapterScore(w AdapterWeights, s AdapterState) float64 {
	switch s {
	case AdapterIdle:
		return w.Idle
	case AdapterFree:
		return w.Load
	case AdapterEvict:
		return w.Load + w.Evict
	}
	return 0
}

// Adapter placement's weights by strategy. The predicted strategy scores
// in seconds, so a load costs the worker's load time (learned from the
// first tokens that followed loads) and an idle adapter a tenth of one.
// An eviction costs adapterEvictSeconds more: with every slot taken the
// request waits in the engine until one frees (the requests running on
// its adapter finish), and the evicted adapter's next request pays a load
// in turn; neither is in the latency model, and both outweigh a queue on
// a worker that has the adapter. In the fleet simulator's LoRA study (50
// adapters, 8 GPUs of 4 slots, 12 req/s, seed 1, 1,000 requests) an
// eviction priced 1 s gave a TTFT p90 of 4.4 s, 3 s 342 ms, 10 s 279 ms,
// 30 s and 100 s 218 ms: priced high, an eviction happens only when every
// worker would make the request wait longer. The other strategies' scores have no time
// unit: for them placement is a tier that dominates the strategy's own
// ranking (active, idle, free, evict), as in the LoRA-affinity scorers of
// other routers.
const (
	adapterIdleShare    = 0.1
	adapterEvictSeconds = 30.0
	adapterTier         = 1e9
)

// AdapterWeightsFor are the adapter weights of worker w under strategy
// name: in seconds for predicted, tiers for the others.
func AdapterWeightsFor(name string, w Worker) AdapterWeights {
	slots := w.MaxLoras
	if name == Predicted {
		load := math.Max(0, w.AdapterLoadSeconds)
		return AdapterWeights{Idle: adapterIdleShare * load, Load: load, Evict: adapterEvictSeconds, Slots: slots}
	}
	return AdapterWeights{Idle: adapterTier, Load: 2 * adapterTier, Evict: adapterTier, Slots: slots}
}

// AddAdapter sets each candidate's adapter weights for a job naming an
// adapter (nothing otherwise). Build calls it after the strategy's plan.
func AddAdapter(name string, j Job, eligible []Worker, cands []Candidate) {
	if j.Adapter == "" {
		return
	}
	byID := make(map[string]int, len(eligible))
	for i, w := range eligible {
		byID[w.ID] = i
	}
	for i := range cands {
		if k, ok := byID[cands[i].Worker]; ok {
			cands[i].Adapter = AdapterWeightsFor(name, eligible[k])
		}
	}
}

// AddAdapterLines adds to each decision line the adapter term (weight 1,
// its value AdapterScore of the state the claim read) and the state's
// name; states may be nil (no adapter, or the claim read none).
func AddAdapterLines(lines []Line, cands []Candidate, states []AdapterState) {
	n := min(len(lines), len(cands), len(states))
	for i, st := range states[:n] {
		if st == AdapterNone {
			continue
		}
		l := &lines[:n][i]
		v := AdapterScore(cands[:n][i].Adapter, st)
		// A new slice: the plan's terms are shared, never modified.
		l.Terms = append(append(make([]Term, 0, len(l.Terms)+1), l.Terms...), Term{Name: "adapter", Weight: 1, Value: v})
		l.Total += v
		l.Adapter = st.String()
	}
}
