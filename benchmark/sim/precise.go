package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/emulate"
)

// The precise prefix emulation needs the engines' KV events, which only
// the simulator has, so the simulator registers it: each replica's
// scheduler builds its instance through scoring's registry, and the
// factory hands that instance to the run being built (preciseBuild),
// which feeds it every GPU's events.
func init() {
	scoring.RegisterStrategy(emulate.PrecisePrefixQueueKVMaxScore, func(scoring.Params) scoring.Strategy {
		p := &preciseReplica{PrecisePrefix: emulate.NewPrecisePrefix()}
		if f := preciseBuild.feed.Load(); f != nil {
			p.feed = f
			f.replicas = append(f.replicas, p.PrecisePrefix)
		}
		return p
	})
}

// preciseBuild is how a factory call reaches the run building its
// replicas: the run holds mu while it builds them, so runs on other
// goroutines wait their turn; feed is the run's while it does.
var preciseBuild struct {
	mu   sync.Mutex
	feed atomic.Pointer[kvFeed]
}

// kvFeed carries every GPU's KV events to every replica's index, as each
// llm-d replica subscribes to every engine's event socket. Events are
// taken from the engines whenever a replica is about to decide, so a
// replica sees every event recorded up to that instant: no delivery
// delay. The simulator runs on one goroutine; kvFeed takes no lock.
type kvFeed struct {
	gpus     []*fleetGPU
	replicas []*emulate.PrecisePrefix
}

// sync applies the events recorded since the last sync to every replica.
func (f *kvFeed) sync() {
	for _, g := range f.gpus {
		for _, ev := range g.st.TakeKVEvents() {
			for _, p := range f.replicas {
				switch ev.Kind {
				case gpusim.KVBlockStored:
					p.Stored(g.id, ev.Hashes)
				case gpusim.KVBlockRemoved:
					p.Removed(g.id, ev.Hashes)
				}
			}
		}
	}
}

// preciseReplica is one replica's precise emulation, taking the events
// due before each decision. Claimed and Released are the emulation's.
type preciseReplica struct {
	*emulate.PrecisePrefix
	feed *kvFeed // nil outside a simulation: no events, speculative entries only
}

// Plan syncs the index with the engines, then plans.
func (p *preciseReplica) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	if p.feed != nil {
		p.feed.sync()
	}
	return p.PrecisePrefix.Plan(in, eligible)
}

// buildReplicas builds the run's router replicas; for the precise
// emulation it also turns on the GPUs' KV events and connects every
// replica's index to them, and for the GIE LoRA emulation it connects
// every replica to the scrapes' LoRA figures (lora.go).
func (r *runner) buildReplicas(ctx context.Context, clock func() time.Time) error {
	switch r.run.Strategy {
	case emulate.PrecisePrefixQueueKVMaxScore:
	case emulate.LoRAQueueKVMaxScore:
		f := &loraFeed{}
		r.loraFeed = f
		loraBuild.mu.Lock()
		defer loraBuild.mu.Unlock()
		loraBuild.feed.Store(f)
		defer loraBuild.feed.Store(nil)
		return r.newReplicas(ctx, clock)
	default:
		return r.newReplicas(ctx, clock)
	}
	f := &kvFeed{gpus: r.gpus}
	for _, g := range r.gpus {
		g.st.EnableKVEvents()
	}
	preciseBuild.mu.Lock()
	defer preciseBuild.mu.Unlock()
	preciseBuild.feed.Store(f)
	defer preciseBuild.feed.Store(nil)
	return r.newReplicas(ctx, clock)
}
