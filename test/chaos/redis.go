package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// The Redis topologies a chaos stack runs on: one redis-server (the
// default), a Sentinel group (master, replica, three Sentinels) or a
// 3-master Cluster with a replica per master.
const (
	RedisSingle   = "single"
	RedisSentinel = "sentinel"
	RedisCluster  = "cluster"
)

// startRedis starts the stack's Redis topology.
func (s *Stack) startRedis(ctx context.Context, topology string) error {
	var err error
	switch topology {
	case "", RedisSingle:
		s.Redis, err = stack.StartRedis(ctx, s.dir, "")
	case RedisSentinel:
		s.Sentinel, err = stack.StartSentinelGroup(ctx, filepath.Join(s.dir, "sentinel"), "chaos")
	case RedisCluster:
		s.Cluster, err = stack.StartCluster(ctx, filepath.Join(s.dir, "cluster"), 3, 1)
	default:
		err = fmt.Errorf("unknown redis topology %q", topology)
	}
	return err
}

// redisConfig is the routers' redis section for the stack's topology.
func (s *Stack) redisConfig(c *config.Redis) {
	switch {
	case s.Sentinel != nil:
		c.Addrs, c.MasterName = s.Sentinel.SentinelAddrs, s.Sentinel.MasterName
	case s.Cluster != nil:
		// Each model in a pool of its own: the routers' keys spread over
		// the cluster's masters.
		c.Addrs, c.Cluster = s.Cluster.Addrs, true
		c.Pools = map[string][]string{"a": {"model-a"}, "b": {"model-b"}}
	default:
		c.URL = "redis://" + s.Redis.Addr + "/0"
	}
}

// redisClient is a fresh client on the stack's Redis, as a router has.
func (s *Stack) redisClient() redis.UniversalClient {
	o := &redis.UniversalOptions{MaxRetries: -1, DialTimeout: time.Second}
	switch {
	case s.Sentinel != nil:
		o.Addrs, o.MasterName = s.Sentinel.SentinelAddrs, s.Sentinel.MasterName
	case s.Cluster != nil:
		o.Addrs, o.IsClusterMode = s.Cluster.Addrs, true
	default:
		o.Addrs = []string{s.Redis.Addr}
	}
	return redis.NewUniversalClient(o)
}

func (s *Stack) stopRedis() {
	if s.Redis != nil {
		s.Redis.Stop(2 * time.Second)
	}
	if s.Sentinel != nil {
		s.Sentinel.Stop()
	}
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
}

var repairLine = regexp.MustCompile(`redis state repaired after (\w+).*?"claims_readded":\s*(\d+).*?"lost_releases_dropped":\s*(\d+)`)

// repairs sums what the replicas' logs say their reconciles fixed.
func (s *Stack) repairs() (n, added, dropped int) {
	for _, r := range s.Routers {
		if r == nil {
			continue
		}
		for _, m := range repairLine.FindAllStringSubmatch(r.Log(), -1) {
			a, _ := strconv.Atoi(m[2])
			d, _ := strconv.Atoi(m[3])
			n, added, dropped = n+1, added+a, dropped+d
		}
	}
	return n, added, dropped
}
