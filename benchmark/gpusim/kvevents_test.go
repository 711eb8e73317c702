package gpusim

import (
	"maps"
	"slices"
	"testing"
)

// kvIndex is what a subscriber builds from the events: the blocks stored
// and not removed since.
type kvIndex map[uint64]bool

func (x kvIndex) apply(t *testing.T, evs []KVEvent) {
	t.Helper()
	for _, ev := range evs {
		for _, h := range ev.Hashes {
			switch {
			case ev.Kind == KVBlockStored && x[h]:
				t.Fatalf("block %x stored twice", h)
			case ev.Kind == KVBlockStored:
				x[h] = true
			case !x[h]:
				t.Fatalf("block %x removed, never stored", h)
			default:
				delete(x, h)
			}
		}
	}
}

func (x kvIndex) sameAs(t *testing.T, p *pagedPool) {
	t.Helper()
	got, want := slices.Sorted(maps.Keys(x)), slices.Sorted(maps.Keys(p.table))
	if !slices.Equal(got, want) {
		t.Fatalf("index from events %x, cache holds %x", got, want)
	}
}

// A hand-computed case on a pool of 4 blocks: a's three blocks are
// stored; freed tail first, so b's allocation of three blocks (one empty)
// evicts a's last two; a's head stays cached.
func TestKVEventsHandComputed(t *testing.T) {
	p := newPagedPool(4*16, 16, true)
	p.events = &kvEventLog{}
	a := &seq{prompt: 49, target: 49, hashes: []uint64{0xa0, 0xa1, 0xa2}}
	b := &seq{prompt: 33, target: 33, hashes: []uint64{0xb0, 0xb1}}
	for _, s := range []*seq{a, b} {
		if _, ok := p.admit(s, 1000); !ok {
			t.Fatal("admit failed")
		}
		s.computed = s.target
		p.computed(s)
		p.release(s)
	}
	want := []KVEvent{
		{KVBlockStored, []uint64{0xa0, 0xa1, 0xa2}},
		{KVBlockRemoved, []uint64{0xa2, 0xa1}},
		{KVBlockStored, []uint64{0xb0, 0xb1}},
	}
	if !slices.EqualFunc(p.events.events, want, func(x, y KVEvent) bool { return x.Kind == y.Kind && slices.Equal(x.Hashes, y.Hashes) }) {
		t.Fatalf("events %+v, want %+v", p.events.events, want)
	}
	x := kvIndex{}
	x.apply(t, p.events.events)
	x.sameAs(t, p)
	if len(x) != 3 || !x[0xa0] {
		t.Fatalf("index %v, want a0, b0, b1", x)
	}
}

// On a run with sharing, eviction and preemption, an index fed only by
// the Stepper's events holds exactly the engine's cached blocks after
// every step.
func TestKVEventsFollowTheCache(t *testing.T) {
	cfg := simConfig(func(c *Config) { c.Profile, c.GPUMemUtil = "a100-llama3-8b", 0.3 })
	x := kvIndex{}
	var evictions int
	driveStepper(t, cfg, sharedLoad(80, 7), func(st *Stepper) {
		if !st.EnableKVEvents() {
			t.Fatal("a calibrated engine with prefix caching publishes no events")
		}
		x.apply(t, st.TakeKVEvents())
		p := st.e.pool.(*pagedPool)
		if len(x) != len(p.table) {
			t.Fatalf("index from events holds %d blocks, the cache %d", len(x), len(p.table))
		}
		for h := range p.table {
			if !x[h] {
				t.Fatalf("cached block %x missing from the index", h)
			}
		}
		evictions = p.evictions
	})
	if evictions == 0 || len(x) == 0 {
		t.Fatalf("the run should evict cached blocks (evictions %d, index %d)", evictions, len(x))
	}
}
