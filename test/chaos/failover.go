package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The Redis failover scenarios: the master holding the router's keys is
// killed and a replica takes over, promoted by Sentinel or by the Cluster
// itself. Replication is asynchronous, so the promoted replica may lack
// the last writes; the routers repair them (state/failover), and the
// judge checks every count is exact as soon as the load stops, before any
// claim lease could have hidden a leak.

func redisFailoverScenarios() []Scenario {
	return []Scenario{
		{
			Name: "redis-failover", Fault: "kill -9 the Redis master; Sentinel promotes its replica",
			Recovery: "kill until every replica reports ok on the promoted master",
			redis:    RedisSentinel, exactCounts: true,
			inject: sentinelFailover, judge: judgeFailover,
		},
		{
			Name: "cluster-failover", Fault: "kill -9 the Cluster master of model-a's pool; its replica takes over",
			Recovery: "kill until every replica reports ok on the new slot master",
			redis:    RedisCluster, exactCounts: true,
			inject: clusterFailover, judge: judgeFailover,
		},
	}
}

func sentinelFailover(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	old, err := s.Sentinel.MasterAddr(ctx)
	if err != nil {
		return err
	}
	t.fault = time.Now()
	s.Sentinel.Master.Kill()
	if _, err := s.Sentinel.WaitPromoted(ctx, old, 30*time.Second); err != nil {
		return fmt.Errorf("sentinel did not promote the replica: %w", err)
	}
	t.detected = time.Now()
	t.notef("Sentinel promoted the replica %s after the kill (down-after %s)", ms(t.detected.Sub(t.fault)), s.Sentinel.DownAfter)
	return afterFailover(ctx, s, t)
}

func clusterFailover(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	// The master of model-a's pool (3 of the 4 workers); model-b's pool
	// may live on another master and not notice.
	key := "{" + s.prefix + ":a}:workers"
	victim, err := s.Cluster.MasterFor(ctx, key)
	if err != nil {
		return err
	}
	if other, err := s.Cluster.MasterFor(ctx, "{"+s.prefix+":b}:workers"); err == nil {
		t.notef("pool a on %s, pool b on %s", victim.Addr, other.Addr)
	}
	c := s.redisClient()
	n, err := c.HLen(ctx, key).Result()
	_ = c.Close()
	if err != nil {
		return fmt.Errorf("read pool a's registry: %w", err)
	}
	if n != int64(len(s.workerBy["model-a"])) {
		return fmt.Errorf("pool a's registry holds %d workers, want %d", n, len(s.workerBy["model-a"]))
	}
	t.fault = time.Now()
	victim.Kill()
	if _, err := s.Cluster.WaitTakenOver(ctx, key, victim, 30*time.Second); err != nil {
		return fmt.Errorf("the cluster did not fail over: %w", err)
	}
	t.detected = time.Now()
	t.notef("the replica took the slot over %s after the kill (cluster-node-timeout 1s)", ms(t.detected.Sub(t.fault)))
	return afterFailover(ctx, s, t)
}

// afterFailover waits until every replica routes on Redis again, then
// keeps the load on.
func afterFailover(ctx context.Context, s *Stack, t *timeline) error {
	t.recovered = pollUntil(ctx, 15*time.Second, func() bool {
		for i := range s.Routers {
			if s.Health(i) != "ok" {
				return false
			}
		}
		return true
	})
	sleep(ctx, t.steady)
	degraded := 0
	for _, r := range s.Routers {
		degraded += strings.Count(r.Log(), "routing on local state (degraded)")
	}
	n, added, dropped := s.repairs()
	t.notef("%d replica(s) went degraded meanwhile; %d reconcile(s) re-added %d claim(s) Redis lacked (made while degraded, or lost) and dropped %d whose release was lost",
		degraded, n, added, dropped)
	return nil
}

func judgeFailover(r *Result, _ []outcome, t *timeline) {
	r.check("zero failed requests", r.Failed == 0, fmt.Sprintf("%d failed", r.Failed))
	r.check("a replica took over", !t.detected.IsZero(), "")
	r.check("every replica back to ok", !t.recovered.IsZero(), "")
}
