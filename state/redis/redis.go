package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Store is the shared store: every replica reads and claims through the
// same Redis (single node, Sentinel or Cluster, through UniversalClient).
// Each multi-key operation is one Lua script, so it is atomic with respect
// to every other replica's, and costs one round trip.
//
// Keys live in shards. Without pools there is one shard, whose prefix P is
// the configured prefix wrapped in a {hash tag}, so every key lives in one
// Cluster slot, which multi-key scripts require. With pools (see
// redis_pools.go) each pool's workers, claims and queues live under a hash
// tag of their own, {prefix:pool}, so pools spread over Cluster shards;
// every key a script touches is still in its pool's slot. Per shard:
//
//	{P}:workers        hash  worker id → spec JSON (the registry)
//	{P}:cap            hash  worker id → max_concurrency (0: none)
//	{P}:health         hash  worker id → healthy | unhealthy | recovering
//	{P}:drain          hash  worker id → "1" while draining
//	{P}:ok             hash  worker id → "1" when healthy and not draining
//	                         (derived, so a claim reads availability once)
//	{P}:inflight       hash  worker id → claims held
//	{P}:claims         hash  claim id → worker id
//	{P}:leases         zset  claim id, scored by lease expiry (ms, Redis clock)
//	{P}:models         set   every model name
//	{P}:model:<m>      set   ids of the workers serving model m
//	{P}:stats:<id>     hash  lat_v/_n/_t, ttft_v/_n/_t, tps_v/_n/_t (moving
//	                         average value, samples, last update ms), req, err
//	{P}:px:<id>        zset  the worker's prefix index: 8-byte block hashes
//	                         scored by recency ({P}:pseq), at most kv_blocks
//	{P}:tokp, :tokd    hash  worker id → in-flight prefill / decode tokens
//	{P}:toka           hash  worker id → prefill ahead: the uncached prompt
//	                         tokens of claims before their first token
//	{P}:lat:<id>       hash  model → the worker's latency-model statistics
//	                         (see latency.go)
//	{P}:ctok           hash  claim id → "prefill decode ahead" it holds
//	{P}:wtok           hash  waiter id → "prefill decode" it will hold
type Store struct {
	client redis.UniversalClient
	limits state.Limits
	shards []*shard // [0]: the default shard, for models in no pool
	pools  map[string]*shard
	// Where workers and ids live, learned as they are seen; used only
	// with pools (one shard needs no lookup).
	where placement
}

var _ state.Store = (*Store)(nil)

//go:embed lua/prelude.lua
var luaPrelude string

//go:embed lua/claim.lua
var luaClaim string

//go:embed lua/release.lua
var luaRelease string

//go:embed lua/move.lua
var luaMove string

//go:embed lua/firsttoken.lua
var luaFirstToken string

//go:embed lua/renew.lua
var luaRenew string

//go:embed lua/adopt.lua
var luaAdopt string

//go:embed lua/register.lua
var luaRegister string

//go:embed lua/set_flag.lua
var luaSetFlag string

//go:embed lua/snapshot.lua
var luaSnapshot string

//go:embed lua/pump.lua
var luaPump string

//go:embed lua/cancel.lua
var luaCancel string

//go:embed lua/poll.lua
var luaPoll string

//go:embed lua/health.lua
var luaHealth string

//go:embed lua/monitor.lua
var luaMonitor string

//go:embed lua/telemetry.lua
var luaTelemetry string

//go:embed lua/workers.lua
var luaWorkers string

func script(body string) *redis.Script { return redis.NewScript(luaPrelude + "\n" + body) }

var (
	scriptClaim    = script("local pair_decide -- nil: Claim, not ClaimPair\n" + luaClaim)
	scriptRelease  = script(luaRelease)
	scriptMove     = script(luaMove)
	scriptRenew    = script(luaRenew)
	scriptFirst    = script(luaFirstToken)
	scriptAdopt    = script(luaAdopt)
	scriptRegister = script(luaRegister)
	scriptSetFlag  = script(luaSetFlag)
	scriptSnapshot = script(luaSnapshot)
	scriptPump     = script(luaPump)
	scriptCancel   = script(luaCancel)
	scriptPoll     = script(luaPoll)
	scriptHealth   = script(luaHealth)
	scriptMonitor  = script(luaMonitor)
	scriptTele     = script(luaTelemetry)
	scriptWorkers  = script(luaWorkers)
)

// New returns a store on client under key prefix (default "llmr").
// Every replica sharing the prefix must use the same limits.
func New(client redis.UniversalClient, prefix string, l state.Limits) *Store {
	if prefix == "" {
		prefix = "llmr"
	}
	return &Store{
		client: client,
		limits: l.WithDefaults(),
		shards: []*shard{newShard("", "{"+prefix+"}:")},
	}
}

// Client returns the underlying client (the queue and decision stream use it).
func (r *Store) Client() redis.UniversalClient { return r.client }

// Limits returns the store's settings, defaults filled in.
func (r *Store) Limits() state.Limits { return r.limits }

// Prefix returns the default shard's key prefix including its hash tag,
// e.g. "{llmr}:" (the decision stream lives there).
func (r *Store) Prefix() string { return r.shards[0].prefix }

// run calls a script on shard sh with the common header: prefix, lease ms,
// global cap, health policy, fair-queue half-life ms.
func (r *Store) run(ctx context.Context, sh *shard, s *redis.Script, args ...any) *redis.Cmd {
	all := make([]any, 0, 5+len(args))
	h := r.limits.Health
	all = append(all, sh.prefix, r.limits.Lease.Milliseconds(), r.limits.GlobalCap,
		fmt.Sprintf("%d,%d,%d", h.ActiveFailures, h.PassiveFailures, h.HoldDown.Milliseconds()),
		max(0, r.limits.FairHalfLife.Milliseconds()))
	return s.Run(ctx, r.client, sh.keys, append(all, args...)...)
}

// Ping checks that the servers holding the store's keys answer (in a
// Cluster, the master of each shard's slot, not any node).
func (r *Store) Ping(ctx context.Context) error {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return r.client.Ping(ctx).Err()
	}
	// The client learns of a failover only from a MOVED reply or its
	// periodic refresh (10 s); a dead master answers neither, so ask the
	// cluster again on every probe.
	cc.ReloadState(ctx)
	for _, sh := range r.shards {
		node, err := cc.MasterForKey(ctx, sh.keys[0])
		if err != nil {
			return err
		}
		if err := node.Ping(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Register merges workers into the registry (see state.Fleet).
func (r *Store) Register(ctx context.Context, specs []state.WorkerSpec) error {
	ws := make([]state.Worker, len(specs))
	for i, s := range specs {
		ws[i] = state.Worker{Spec: s, Health: scoring.Healthy}
	}
	return r.restore(ctx, ws, false)
}

// Claim picks and claims atomically, or queues (see claim.lua).
func (r *Store) Claim(ctx context.Context, req state.ClaimRequest) (state.ClaimResult, error) {
	sh, args := r.claimArgs(ctx, req)
	res, err := r.run(ctx, sh, scriptClaim, args...).Slice()
	if err != nil {
		return state.ClaimResult{}, fmt.Errorf("redis claim: %w", err)
	}
	if len(res) != 11 {
		return state.ClaimResult{}, fmt.Errorf("redis claim: unexpected reply of %d parts", len(res))
	}
	return r.claimResult(req, sh, res), nil
}

// claimArgs are claim.lua's shard and arguments for req.
func (r *Store) claimArgs(ctx context.Context, req state.ClaimRequest) (*shard, []any) {
	q, queue, rank := state.QueueSpec{}, "0", 0
	if req.Queue != nil {
		q, queue, rank = *req.Queue, "1", req.Queue.Priority.Rank()
	}
	sh := r.shardOfClaim(ctx, req)
	aff := req.ReadsLive()
	args := []any{
		req.ID, packCandidates(req.Candidates, aff, req.Adapter != ""),
		q.Model, queue, rank, q.Allow, q.Replica, r.limits.Lease.Milliseconds(),
		q.FairTenant(), strconv.FormatFloat(q.FairCost(), 'g', -1, 64),
		strconv.FormatFloat(max(0, q.OutputCost), 'g', -1, 64), max(0, q.ChargedOutput),
	}
	if aff {
		a := req.Prompt
		args = append(args, "1", packBlocks(a.Blocks), max(0, a.PromptTokens), max(0, a.DecodeTokens))
	} else {
		args = append(args, "", "", 0, 0)
	}
	args = append(args, req.Adapter)
	return sh, args
}

// claimResult reads claim.lua's first eleven reply parts.
func (r *Store) claimResult(req state.ClaimRequest, sh *shard, res []any) state.ClaimResult {
	aff := req.ReadsLive()
	outcome, _ := res[0].(int64)
	idx, _ := res[1].(int64)
	active, _ := res[2].([]any)
	avail, _ := res[3].([]any)
	pos, _ := res[4].(int64)
	out := state.ClaimResult{Index: -1, Active: make([]int, len(req.Candidates)), Available: make([]bool, len(req.Candidates))}
	switch outcome {
	case 1:
		out.Index = int(idx) - 1
		r.where.noteID(req.ID, sh)
	case 2:
		out.Queued, out.Position = true, int(pos)
		r.where.noteID(req.ID, sh)
	case 3:
		out.QueueFull = true
	}
	for i := range req.Candidates {
		if i < len(active) {
			a, _ := active[i].(int64)
			out.Active[i] = int(a)
		}
		if i < len(avail) {
			v, _ := avail[i].(int64)
			out.Available[i] = v == 1
		}
	}
	if req.Adapter != "" {
		st, _ := res[9].([]any)
		out.Adapter = make([]scoring.AdapterState, len(req.Candidates))
		for i := range out.Adapter {
			out.Adapter[i] = scoring.AdapterState(intAt(st, i))
		}
		out.Evicted, _ = res[10].(string)
	}
	if aff {
		out.Live = make([]scoring.Live, len(req.Candidates))
		m, _ := res[5].([]any)
		p, _ := res[6].([]any)
		d, _ := res[7].([]any)
		q, _ := res[8].([]any)
		for i := range out.Live {
			out.Live[i] = scoring.Live{Match: intAt(m, i), Prefill: intAt(p, i), Decode: intAt(d, i), Ahead: intAt(q, i)}
			if out.Live[i].Match < 0 {
				out.Live[i].Match, out.Live[i].Unread = 0, true
			}
		}
	}
	return out
}

func intAt(xs []any, i int) int {
	if i >= len(xs) {
		return 0
	}
	v, _ := xs[i].(int64)
	return int(v)
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Release ends a claim once and updates the averages (one round trip).
func (r *Store) Release(ctx context.Context, rel state.Release) (bool, error) {
	failed := "0"
	if rel.Failed {
		failed = "1"
	}
	for _, sh := range r.shardsOfID(ctx, rel.ID, rel.Worker) {
		n, err := r.run(ctx, sh, scriptRelease, rel.ID, rel.Worker, failed,
			fnum(rel.Latency.Seconds()), fnum(rel.TTFT.Seconds()), fnum(rel.TokensPerSec), fnum(rel.Alpha), max(0, rel.OutputTokens)).Int()
		if err != nil {
			return false, fmt.Errorf("redis release: %w", err)
		}
		if n == 1 {
			r.where.forgetID(rel.ID)
			return true, nil
		}
	}
	r.where.forgetID(rel.ID)
	return false, nil
}

// Move re-attributes a held claim to another worker.
func (r *Store) Move(ctx context.Context, id, to string) error {
	return scriptError(r.run(ctx, r.shardsOfID(ctx, id, to)[0], scriptMove, id, to).Err())
}

// FirstToken stops counting claim id's uncached prompt as prefill ahead
// (see firsttoken.lua); unknown claims are ignored.
func (r *Store) FirstToken(ctx context.Context, id string) error {
	for _, sh := range r.shardsOfID(ctx, id, "") {
		n, err := r.run(ctx, sh, scriptFirst, id).Int()
		if err != nil {
			return fmt.Errorf("redis first token: %w", err)
		}
		if n == 1 {
			return nil
		}
	}
	return nil
}

// Renew extends the leases of the given claims and waiters.
func (r *Store) Renew(ctx context.Context, claims, waiters []string) error {
	if len(r.shards) == 1 {
		return r.renewShard(ctx, r.shards[0], claims, waiters)
	}
	cs, ws := r.where.splitIDs(r.shards, claims), r.where.splitIDs(r.shards, waiters)
	for _, sh := range r.shards {
		if err := r.renewShard(ctx, sh, cs[sh], ws[sh]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Store) renewShard(ctx context.Context, sh *shard, claims, waiters []string) error {
	for len(claims)+len(waiters) > 0 {
		cb := claims[:min(len(claims), 1000)]
		claims = claims[len(cb):]
		wb := waiters[:min(len(waiters), 1000-len(cb))]
		waiters = waiters[len(wb):]
		args := make([]any, 0, 2+len(cb)+len(wb))
		args = append(args, r.limits.Lease.Milliseconds(), len(cb))
		for _, id := range cb {
			args = append(args, id)
		}
		for _, id := range wb {
			args = append(args, id)
		}
		if err := r.run(ctx, sh, scriptRenew, args...).Err(); err != nil {
			return fmt.Errorf("redis renew: %w", err)
		}
	}
	return nil
}

// Adopt makes sure each given claim is counted exactly once, re-adding
// those Redis lost (see adopt.lua). It returns how many were re-added.
func (r *Store) Adopt(ctx context.Context, claims map[string]string) (int, error) {
	groups := map[*shard][]any{}
	for id, w := range claims {
		sh := r.shardOfWorker(ctx, w)
		groups[sh] = append(groups[sh], id, w)
		r.where.noteID(id, sh)
	}
	added := 0
	for sh, args := range groups {
		n, err := r.run(ctx, sh, scriptAdopt, args...).Int()
		if err != nil {
			return added, fmt.Errorf("redis adopt: %w", err)
		}
		added += n
	}
	return added, nil
}

// SetHealth records a worker's health.
func (r *Store) SetHealth(ctx context.Context, worker string, health scoring.Health) error {
	return scriptError(r.run(ctx, r.shardOfWorker(ctx, worker), scriptSetFlag, worker, "health", string(health)).Err())
}

// SetDraining sets or clears a worker's drain flag.
func (r *Store) SetDraining(ctx context.Context, worker string, draining bool) error {
	v := "0"
	if draining {
		v = "1"
	}
	return scriptError(r.run(ctx, r.shardOfWorker(ctx, worker), scriptSetFlag, worker, "drain", v).Err())
}

// scriptError maps the scripts' error replies to the package's sentinels.
func scriptError(err error) error {
	if err == nil {
		return nil
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "unknown claim"):
		return state.ErrUnknownClaim
	case strings.Contains(msg, "unknown worker:"):
		_, detail, _ := strings.Cut(msg, "unknown worker:")
		return fmt.Errorf("%w:%s", state.ErrUnknownWorker, detail)
	case strings.Contains(msg, "unknown worker"):
		return state.ErrUnknownWorker
	}
	return err
}

// IsUnavailable reports whether err means Redis could not be reached (as
// opposed to Redis answering with an error).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Replies from a live server; LOADING/READONLY/CLUSTERDOWN are
		// transient conditions of an unusable server.
		msg := rerr.Error()
		return strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "READONLY") ||
			strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "MASTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return !errors.Is(err, state.ErrUnknownClaim) && !errors.Is(err, state.ErrUnknownWorker)
}
