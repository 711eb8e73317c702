package app

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/decisions"
	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/failover"
	"github.com/llm-router/llm-router/state/memory"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// RedisClient builds a UniversalClient from the config: one node from url
// or a single addr, Sentinel with master_name, Cluster with several addrs
// (or cluster: true). Retries are off: a failing command should fall back
// to local state at once rather than stall the request.
func RedisClient(c config.Redis) (redis.UniversalClient, error) {
	opts := &redis.UniversalOptions{
		Addrs:         c.Addrs,
		MasterName:    c.MasterName,
		Username:      c.Username,
		Password:      c.Password,
		DB:            c.DB,
		IsClusterMode: c.Cluster,
		DialTimeout:   c.Timeout.D(),
		ReadTimeout:   c.Timeout.D(),
		WriteTimeout:  c.Timeout.D(),
		PoolTimeout:   c.Timeout.D(),
		PoolSize:      c.PoolSize,
		MaxRetries:    -1,
	}
	if c.URL != "" {
		o, err := redis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("redis.url: %w", err)
		}
		opts.Addrs = []string{o.Addr}
		opts.Username, opts.Password, opts.DB, opts.TLSConfig = o.Username, o.Password, o.DB, o.TLSConfig
	}
	return redis.NewUniversalClient(opts), nil
}

// backend is the store the process runs on and what shares its Redis
// client.
type backend struct {
	store    state.Store
	run      func(context.Context) // the store's background loop; closes the client after
	degraded func() bool
	// stream is the shared decision stream, on the store's client and hash
	// tag; nil without Redis.
	stream *decisions.Stream
}

// newBackend returns the in-memory store, or Redis wrapped for outages with
// the decision stream beside it: one Redis client, built here, for both.
func newBackend(cfg config.Config, log *zap.Logger, m *metrics.Metrics) (backend, error) {
	limits := state.Limits{
		Lease:        cfg.ClaimLease.D(),
		GlobalCap:    cfg.Queue.MaxConcurrentRequests,
		FairHalfLife: cfg.Queue.Fairness.Decay.D(),
		Health: state.HealthPolicy{
			ActiveFailures:  cfg.Health.FailureThreshold,
			PassiveFailures: cfg.Health.PassiveFailureThreshold,
			HoldDown:        cfg.Health.HoldDown.D(),
		},
	}
	if !cfg.Redis.Enabled() {
		return memoryBackend(memory.New(nil, limits)), nil
	}
	client, err := RedisClient(cfg.Redis)
	if err != nil {
		return backend{}, err
	}
	primary, err := redisstore.NewPooled(client, cfg.Redis.KeyPrefix, limits, cfg.Redis.Pools)
	if err != nil {
		_ = client.Close()
		return backend{}, err
	}
	f := failover.New(primary, func(degraded bool, err error) {
		if degraded {
			m.StoreDegraded.Set(1)
			log.Error("redis unreachable: routing on local state (degraded)", zap.Error(err))
			return
		}
		m.StoreDegraded.Set(0)
		log.Warn("redis reachable again: state reconciled")
	})
	f.OnRepair(func(r failover.Repair) {
		log.Warn("redis state repaired after "+r.Reason,
			zap.Int("claims_readded", r.Added), zap.Int("lost_releases_dropped", r.Dropped))
	})
	// Any replica can explain any decision: they share a bounded stream,
	// written in batches off the request path.
	stream := decisions.NewStream(client, primary.Prefix(), cfg.DecisionLogSize, log.Named("decisions"))
	stream.OnFlush = func(err error) {
		m.StoreRoundTrips.WithLabelValues("decisions").Inc()
		if err != nil {
			m.StoreErrors.WithLabelValues("decisions").Inc()
		}
	}
	run := func(ctx context.Context) {
		f.Run(ctx, 250*time.Millisecond)
		_ = client.Close()
	}
	return backend{store: f, run: run, degraded: f.Degraded, stream: stream}, nil
}

// memoryBackend runs on store alone: no background loop, never degraded.
func memoryBackend(store state.Store) backend {
	return backend{store: store, run: func(context.Context) {}, degraded: func() bool { return false }}
}
