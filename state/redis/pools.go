package redis

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
)

// Pools group models into worker pools: a pool is a set of models, and
// its workers are the workers serving them. Each pool's keys carry a hash
// tag of their own, so in a Redis Cluster pools land on different shards
// and claims for models of different pools never meet on one server. A
// claim stays one script on one shard: its candidates all serve the
// requested model, so they are all in that model's pool.
//
// How pools are formed: by configuration (redis.pools), never guessed. A
// model belongs to at most one pool; models in no pool share the default
// shard (the keys a store without pools uses). A worker belongs to the pool
// of its models, and every model of a worker must be in the same pool (or
// in none): a worker serving models of two pools is refused at
// registration, because one claim script could not see both pools' counts
// of it. A queued waiter can be granted any worker of its pool, and a freed
// worker's slot goes to the best waiter among all the models it serves,
// as without pools.
//
// What pools change: queue.max_concurrent_requests (GlobalCap) is counted
// per shard, so with pools it caps each pool (and the default shard), not
// the fleet.
type Pools map[string][]string // pool name → models

// NewPooled is New with the models of each pool in keys of
// their own ({prefix:pool}). Every replica must use the same pools.
func NewPooled(client redis.UniversalClient, prefix string, l state.Limits, pools Pools) (*Store, error) {
	r := New(client, prefix, l)
	if len(pools) == 0 {
		return r, nil
	}
	base := r.shards[0].prefix
	base = base[1 : len(base)-2] // the prefix inside its braces
	names := make([]string, 0, len(pools))
	for name := range pools {
		names = append(names, name)
	}
	sort.Strings(names)
	r.pools = map[string]*shard{}
	r.where.pooled = true
	for _, name := range names {
		if name == "" {
			return nil, fmt.Errorf("redis pools: a pool needs a name")
		}
		sh := newShard(name, "{"+base+":"+name+"}:")
		r.shards = append(r.shards, sh)
		for _, m := range pools[name] {
			if other, ok := r.pools[m]; ok {
				return nil, fmt.Errorf("redis pools: model %s is in pools %s and %s", m, other.name, name)
			}
			r.pools[m] = sh
		}
	}
	return r, nil
}

// shard is one hash tag's keys: a pool's, or the default one.
type shard struct {
	name   string // the pool; "" for the default shard
	prefix string // e.g. "{llmr}:" or "{llmr:chat}:"
	keys   []string
}

func newShard(name, p string) *shard {
	return &shard{name: name, prefix: p, keys: []string{
		p + "workers", p + "inflight", p + "health", p + "drain",
		p + "claims", p + "leases", p + "cap", p + "models", p + "ok",
		p + "waiters", p + "wleases", p + "grants", p + "qseq", p + "total", p + "wmodels",
		p + "wkleases", p + "source",
	}}
}

// shardOfModels is the shard of a worker serving models.
func (r *Store) shardOfModels(models []string) (*shard, error) {
	if r.pools == nil {
		return r.shards[0], nil
	}
	var sh *shard
	for _, m := range models {
		p := r.pools[m]
		if p == nil {
			p = r.shards[0]
		}
		if sh != nil && p != sh {
			return nil, fmt.Errorf("%w: it serves models of pools %q and %q (put them in one pool)", state.ErrPoolMix, sh.name, p.name)
		}
		sh = p
	}
	if sh == nil {
		sh = r.shards[0]
	}
	return sh, nil
}

// CheckModels reports ErrPoolMix when models span pools: no shard could
// hold a worker serving them.
func (r *Store) CheckModels(models []string) error {
	_, err := r.shardOfModels(models)
	return err
}

// shardOfWorker is where worker id lives: learned from registrations and
// snapshots, else looked up (once) in each shard's registry; the default
// shard when no shard has it.
func (r *Store) shardOfWorker(ctx context.Context, id string) *shard {
	if r.pools == nil {
		return r.shards[0]
	}
	if sh := r.where.worker(id); sh != nil {
		return sh
	}
	for _, sh := range r.shards {
		if ok, err := r.client.HExists(ctx, sh.keys[0], id).Result(); err == nil && ok {
			r.where.learnWorker(id, sh)
			return sh
		}
	}
	return r.shards[0]
}

// shardOfClaim is the shard of the requested model: its queue's, or its
// first candidate's (they all serve the model, so share its pool).
func (r *Store) shardOfClaim(ctx context.Context, req state.ClaimRequest) *shard {
	if r.pools == nil {
		return r.shards[0]
	}
	if req.Queue != nil {
		if sh := r.pools[req.Queue.Model]; sh != nil {
			return sh
		}
	}
	if len(req.Candidates) > 0 {
		return r.shardOfWorker(ctx, req.Candidates[0].Worker)
	}
	return r.shards[0]
}

// shardsOfID lists where claim or waiter id may be: where this store put
// it, else its worker's shard (when given), else every shard.
func (r *Store) shardsOfID(ctx context.Context, id, worker string) []*shard {
	if r.pools == nil {
		return r.shards
	}
	if sh := r.where.id(id); sh != nil {
		return []*shard{sh}
	}
	if worker != "" {
		return []*shard{r.shardOfWorker(ctx, worker)}
	}
	return r.shards
}

// placement remembers which shard each worker, claim and queued waiter is
// in. Ids are noted only with pools, and dropped on release or cancel.
type placement struct {
	pooled  bool // set once, before use
	mu      sync.RWMutex
	workers map[string]*shard
	ids     map[string]*shard
}

func (p *placement) learnWorker(id string, sh *shard) {
	if !p.pooled {
		return
	}
	p.mu.Lock()
	if p.workers == nil {
		p.workers = map[string]*shard{}
	}
	p.workers[id] = sh
	p.mu.Unlock()
}

func (p *placement) worker(id string) *shard {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.workers[id]
}

func (p *placement) noteID(id string, sh *shard) {
	if !p.pooled {
		return // one shard: nothing to look up later
	}
	p.mu.Lock()
	if p.ids == nil {
		p.ids = map[string]*shard{}
	}
	p.ids[id] = sh
	p.mu.Unlock()
}

func (p *placement) id(id string) *shard {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ids[id]
}

func (p *placement) forgetID(id string) {
	if !p.pooled {
		return
	}
	p.mu.Lock()
	delete(p.ids, id)
	p.mu.Unlock()
}

// splitIDs groups ids by shard; an id of unknown place goes to every
// shard (renewing an absent id is a no-op).
func (p *placement) splitIDs(shards []*shard, ids []string) map[*shard][]string {
	out := map[*shard][]string{}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, id := range ids {
		if sh := p.ids[id]; sh != nil {
			out[sh] = append(out[sh], id)
			continue
		}
		for _, sh := range shards {
			out[sh] = append(out[sh], id)
		}
	}
	return out
}
