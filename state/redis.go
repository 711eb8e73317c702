package state

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the shared store: every replica reads and claims through the
// same Redis (single node, Sentinel or Cluster, through UniversalClient).
// Each multi-key operation is one Lua script, so it is atomic with respect
// to every other replica's, and costs one round trip.
//
// Keys (P is the configured prefix, wrapped in a {hash tag} so every key
// lives in one Cluster slot, which multi-key scripts require):
//
//	{P}:workers        hash  worker id → spec JSON (the registry)
//	{P}:cap            hash  worker id → max_concurrency
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
type Redis struct {
	client redis.UniversalClient
	prefix string
	keys   []string
	limits Limits
}

var _ = (*Redis)(nil)

//go:embed lua/prelude.lua
var luaPrelude string

//go:embed lua/claim.lua
var luaClaim string

//go:embed lua/release.lua
var luaRelease string

//go:embed lua/move.lua
var luaMove string

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
	scriptClaim    = script(luaClaim)
	scriptRelease  = script(luaRelease)
	scriptMove     = script(luaMove)
	scriptRenew    = script(luaRenew)
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

// NewRedis returns a store on client under key prefix (default "llmr").
// Every replica sharing the prefix must use the same limits.
func NewRedis(client redis.UniversalClient, prefix string, l Limits) *Redis {
	if prefix == "" {
		prefix = "llmr"
	}
	p := "{" + prefix + "}:"
	return &Redis{
		client: client,
		prefix: p,
		limits: l.withDefaults(),
		keys: []string{
			p + "workers", p + "inflight", p + "health", p + "drain",
			p + "claims", p + "leases", p + "cap", p + "models", p + "ok",
			p + "waiters", p + "wleases", p + "grants", p + "qseq", p + "total", p + "wmodels",
			p + "wkleases", p + "source",
		},
	}
}

// Client returns the underlying client (the queue and decision stream use it).
func (r *Redis) Client() redis.UniversalClient { return r.client }

// Prefix returns the key prefix including its hash tag, e.g. "{llmr}:".
func (r *Redis) Prefix() string { return r.prefix }

// run calls a script with the common header: prefix, lease ms, global cap,
// health policy.
func (r *Redis) run(ctx context.Context, s *redis.Script, args ...any) *redis.Cmd {
	all := make([]any, 0, 4+len(args))
	h := r.limits.Health
	all = append(all, r.prefix, r.limits.Lease.Milliseconds(), r.limits.GlobalCap,
		fmt.Sprintf("%d,%d,%d", h.ActiveFailures, h.PassiveFailures, h.HoldDown.Milliseconds()))
	return s.Run(ctx, r.client, r.keys, append(all, args...)...)
}

// Ping checks that the server holding the store's keys answers (in a
// Cluster, the master of their slot, not any node).
func (r *Redis) Ping(ctx context.Context) error {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return r.client.Ping(ctx).Err()
	}
	// The client learns of a failover only from a MOVED reply or its
	// periodic refresh (10 s); a dead master answers neither, so ask the
	// cluster again on every probe.
	cc.ReloadState(ctx)
	node, err := cc.MasterForKey(ctx, r.keys[0])
	if err != nil {
		return err
	}
	return node.Ping(ctx).Err()
}

// Register merges workers into the registry (see Memory.Register).
func (r *Redis) Register(ctx context.Context, specs []WorkerSpec) error {
	ws := make([]Worker, len(specs))
	for i, s := range specs {
		ws[i] = Worker{Spec: s, Health: Healthy}
	}
	return r.restore(ctx, ws, false)
}

// Restore registers workers with their last known live state (health,
// drain, averages) wherever Redis has none: after Redis lost its data, any
// replica can put back what it last saw.
func (r *Redis) Restore(ctx context.Context, ws []Worker) error { return r.restore(ctx, ws, true) }

func (r *Redis) restore(ctx context.Context, ws []Worker, withState bool) error {
	if len(ws) == 0 {
		return nil
	}
	args := []any{len(ws)}
	for _, w := range ws {
		spec, err := json.Marshal(w.Spec)
		if err != nil {
			return err
		}
		drain := ""
		if w.Draining {
			drain = "1"
		}
		health := w.Health
		if health == "" {
			health = Healthy
		}
		args = append(args, w.Spec.ID, string(spec), w.Spec.MaxConcurrency, health, drain, len(w.Spec.Models))
		for _, m := range w.Spec.Models {
			args = append(args, m)
		}
		var stats []any
		if withState {
			stats = statsFields(w.Stats)
		}
		args = append(args, len(stats)/2)
		args = append(args, stats...)
	}
	return r.run(ctx, scriptRegister, args...).Err()
}

func statsFields(s Stats) []any {
	var out []any
	add := func(f string, e EMA) {
		if e.Samples == 0 {
			return
		}
		out = append(out, f+"_v", strconv.FormatFloat(e.Value, 'g', -1, 64), f+"_n", e.Samples, f+"_t", e.Updated.UnixMilli())
	}
	add("lat", s.Latency)
	add("ttft", s.TTFT)
	add("tps", s.TokensPerSec)
	if s.Requests > 0 {
		out = append(out, "req", s.Requests, "err", s.Errors)
	}
	return out
}

// Snapshot reads every worker's state in one round trip.
func (r *Redis) Snapshot(ctx context.Context) (Snapshot, error) {
	res, err := r.run(ctx, scriptSnapshot).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("redis snapshot: %w", err)
	}
	if len(res) != 9 {
		return Snapshot{}, fmt.Errorf("redis snapshot: unexpected reply of %d parts", len(res))
	}
	leases := pairs(res[8])
	teleLists, _ := res[7].([]any)
	now, _ := res[0].(int64)
	workers := pairs(res[1])
	inflight, health, drain := pairs(res[2]), pairs(res[3]), pairs(res[4])
	statsLists, _ := res[5].([]any)
	snap := Snapshot{At: time.UnixMilli(now)}
	for i, kv := range workers {
		var spec WorkerSpec
		if err := json.Unmarshal([]byte(kv[1]), &spec); err != nil {
			return Snapshot{}, fmt.Errorf("redis snapshot: worker %s: %w", kv[0], err)
		}
		w := Worker{Spec: spec, Health: lookup(health, kv[0]), Draining: lookup(drain, kv[0]) == "1"}
		w.InFlight, _ = strconv.Atoi(lookup(inflight, kv[0]))
		if i < len(statsLists) {
			w.Stats = parseStats(pairs(statsLists[i]))
		}
		if i < len(teleLists) {
			w.Telemetry = parseTelemetry(pairs(teleLists[i]))
		}
		if exp := lookup(leases, kv[0]); exp != "" {
			ms, _ := strconv.ParseFloat(exp, 64)
			w.Registered, w.LeaseExpires = true, time.UnixMilli(int64(ms))
		}
		snap.Workers = append(snap.Workers, w)
	}
	slices.SortFunc(snap.Workers, func(a, b Worker) int { return strings.Compare(a.Spec.ID, b.Spec.ID) })
	qs, _ := res[6].([]any)
	for i := 0; i+3 < len(qs); i += 4 {
		model, _ := qs[i].(string)
		c, _ := qs[i+1].(int64)
		st, _ := qs[i+2].(int64)
		b, _ := qs[i+3].(int64)
		snap.Queues = append(snap.Queues, QueueDepth{Model: model, Critical: int(c), Standard: int(st), Batch: int(b)})
	}
	slices.SortFunc(snap.Queues, func(a, b QueueDepth) int { return strings.Compare(a.Model, b.Model) })
	return snap, nil
}

func pairs(v any) [][2]string {
	flat, _ := v.([]any)
	out := make([][2]string, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		out = append(out, [2]string{k, val})
	}
	return out
}

func lookup(kvs [][2]string, k string) string {
	for _, kv := range kvs {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

func parseStats(kvs [][2]string) Stats {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	ema := func(f string) EMA {
		v, _ := strconv.ParseFloat(m[f+"_v"], 64)
		n, _ := strconv.ParseInt(m[f+"_n"], 10, 64)
		t, _ := strconv.ParseInt(m[f+"_t"], 10, 64)
		e := EMA{Value: v, Samples: n}
		if t > 0 {
			e.Updated = time.UnixMilli(t)
		}
		return e
	}
	req, _ := strconv.ParseInt(m["req"], 10, 64)
	errs, _ := strconv.ParseInt(m["err"], 10, 64)
	return Stats{Latency: ema("lat"), TTFT: ema("ttft"), TokensPerSec: ema("tps"), Requests: req, Errors: errs}
}

// Claim picks and claims atomically, or queues (see claim.lua).
func (r *Redis) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	q, queue := QueueSpec{}, "0"
	if req.Queue != nil {
		q, queue = *req.Queue, "1"
	}
	res, err := r.run(ctx, scriptClaim, req.ID, packCandidates(req.Candidates),
		q.Model, queue, q.Rank, q.Allow, q.Replica, r.limits.Lease.Milliseconds()).Slice()
	if err != nil {
		return ClaimResult{}, fmt.Errorf("redis claim: %w", err)
	}
	if len(res) != 5 {
		return ClaimResult{}, fmt.Errorf("redis claim: unexpected reply of %d parts", len(res))
	}
	outcome, _ := res[0].(int64)
	idx, _ := res[1].(int64)
	active, _ := res[2].([]any)
	avail, _ := res[3].([]any)
	pos, _ := res[4].(int64)
	out := ClaimResult{Index: -1, Active: make([]int, len(req.Candidates)), Available: make([]bool, len(req.Candidates))}
	switch outcome {
	case 1:
		out.Index = int(idx) - 1
	case 2:
		out.Queued, out.Position = true, int(pos)
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
	return out, nil
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Release ends a claim once and updates the averages (one round trip).
func (r *Redis) Release(ctx context.Context, rel Release) (bool, error) {
	failed := "0"
	if rel.Failed {
		failed = "1"
	}
	n, err := r.run(ctx, scriptRelease, rel.ID, rel.Worker, failed,
		fnum(rel.Latency.Seconds()), fnum(rel.TTFT.Seconds()), fnum(rel.TokensPerSec), fnum(rel.Alpha)).Int()
	if err != nil {
		return false, fmt.Errorf("redis release: %w", err)
	}
	return n == 1, nil
}

// Move re-attributes a held claim to another worker.
func (r *Redis) Move(ctx context.Context, id, to string) error {
	return scriptError(r.run(ctx, scriptMove, id, to).Err())
}

// Renew extends the leases of the given claims and waiters.
func (r *Redis) Renew(ctx context.Context, claims, waiters []string) error {
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
		if err := r.run(ctx, scriptRenew, args...).Err(); err != nil {
			return fmt.Errorf("redis renew: %w", err)
		}
	}
	return nil
}

// Adopt makes sure each given claim is counted exactly once, re-adding
// those Redis lost (see adopt.lua). It returns how many were re-added.
func (r *Redis) Adopt(ctx context.Context, claims map[string]string) (int, error) {
	if len(claims) == 0 {
		return 0, nil
	}
	var args []any
	for id, w := range claims {
		args = append(args, id, w)
	}
	n, err := r.run(ctx, scriptAdopt, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis adopt: %w", err)
	}
	return n, nil
}

// SetHealth records a worker's health.
func (r *Redis) SetHealth(ctx context.Context, worker, health string) error {
	return scriptError(r.run(ctx, scriptSetFlag, worker, "health", health).Err())
}

// SetDraining sets or clears a worker's drain flag.
func (r *Redis) SetDraining(ctx context.Context, worker string, draining bool) error {
	v := "0"
	if draining {
		v = "1"
	}
	return scriptError(r.run(ctx, scriptSetFlag, worker, "drain", v).Err())
}

// scriptError maps the scripts' error replies to the package's sentinels.
func scriptError(err error) error {
	if err == nil {
		return nil
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "unknown claim"):
		return ErrUnknownClaim
	case strings.Contains(msg, "unknown worker:"):
		_, detail, _ := strings.Cut(msg, "unknown worker:")
		return fmt.Errorf("%w:%s", ErrUnknownWorker, detail)
	case strings.Contains(msg, "unknown worker"):
		return ErrUnknownWorker
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
	return !errors.Is(err, ErrUnknownClaim) && !errors.Is(err, ErrUnknownWorker)
}
