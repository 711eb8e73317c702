package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file starts the highly available Redis topologies the tests and the
// chaos suite run against: a Sentinel group (master, replica, three
// Sentinels) and a Redis Cluster, all on loopback free ports.

// SentinelBinary finds redis-sentinel: $REDIS_SENTINEL, then PATH, then
// /usr/bin/redis-sentinel (Debian packages it apart from redis-server).
func SentinelBinary() (string, error) {
	return findBinary("redis-sentinel", "REDIS_SENTINEL")
}

// CLIBinary finds redis-cli ($REDIS_CLI, then PATH), which creates Clusters.
func CLIBinary() (string, error) {
	if p := os.Getenv("REDIS_CLI"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-cli"); err == nil {
		return p, nil
	}
	return "", errors.New("no redis-cli: run `make redis` (apt-get install -y redis-tools) or set REDIS_CLI")
}

// startRedisArgs starts a redis-server on addr with extra arguments and
// waits until it accepts connections.
func startRedisArgs(ctx context.Context, name, dir, addr string, extra ...string) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	args := append([]string{
		"--bind", host, "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
	}, extra...)
	p, err := Start(name+" "+addr, bin, args, nil)
	if err != nil {
		return nil, err
	}
	r := &Redis{Proc: p, Addr: addr, bin: bin, dir: dir}
	if err := WaitTCP(ctx, addr, 10*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("%s %s: %w\n%s", name, addr, err, p.Log())
	}
	return r, nil
}

// SentinelGroup is a master, one replica and three Sentinels watching the
// master under MasterName, with a quorum of two. Sentinels judge the
// master down after DownAfter, so a killed master is replaced within about
// DownAfter plus one election.
type SentinelGroup struct {
	MasterName string
	Master     *Redis
	Replica    *Redis
	Sentinels  []*Proc
	// SentinelAddrs are what a client is given (redis.addrs).
	SentinelAddrs []string
	DownAfter     time.Duration
}

// StartSentinelGroup starts the group under dir and waits until the
// replica is in sync and every Sentinel knows the replica and the other
// Sentinels, so a failover can succeed from the first moment.
func StartSentinelGroup(ctx context.Context, dir, masterName string) (*SentinelGroup, error) {
	sbin, err := SentinelBinary()
	if err != nil {
		return nil, err
	}
	addrs := MustFreeAddrs(5)
	g := &SentinelGroup{MasterName: masterName, DownAfter: time.Second}
	if g.Master, err = startRedisArgs(ctx, "redis master", filepath.Join(dir, "master"), addrs[0]); err != nil {
		return nil, err
	}
	mhost, mport, _ := net.SplitHostPort(addrs[0])
	if g.Replica, err = startRedisArgs(ctx, "redis replica", filepath.Join(dir, "replica"), addrs[1], "--replicaof", mhost, mport); err != nil {
		g.Stop()
		return nil, err
	}
	for i, addr := range addrs[2:] {
		host, port, _ := net.SplitHostPort(addr)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		// Sentinel rewrites its config file, so each has its own.
		body := fmt.Sprintf("bind %s\nport %s\nprotected-mode no\ndaemonize no\nloglevel warning\ndir %s\n"+
			"sentinel resolve-hostnames no\nsentinel monitor %s %s %s 2\n"+
			"sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			host, port, dir, masterName, mhost, mport, masterName, g.DownAfter.Milliseconds(), masterName, masterName)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			g.Stop()
			return nil, err
		}
		p, err := Start("redis-sentinel "+addr, sbin, []string{conf}, nil)
		if err != nil {
			g.Stop()
			return nil, err
		}
		g.Sentinels = append(g.Sentinels, p)
		g.SentinelAddrs = append(g.SentinelAddrs, addr)
	}
	if err := g.waitReady(ctx, 20*time.Second); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

func (g *SentinelGroup) waitReady(ctx context.Context, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func() error {
		rc := redis.NewClient(&redis.Options{Addr: g.Replica.Addr, MaxRetries: -1})
		info, err := rc.Info(ctx, "replication").Result()
		_ = rc.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("replica not in sync yet")
		}
		for _, addr := range g.SentinelAddrs {
			sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
			replicas, err := sc.Replicas(ctx, g.MasterName).Result()
			if err == nil && len(replicas) == 0 {
				err = fmt.Errorf("sentinel %s: no replica known yet", addr)
			}
			if err == nil {
				var others []map[string]string
				others, err = sc.Sentinels(ctx, g.MasterName).Result()
				if err == nil && len(others) < len(g.SentinelAddrs)-1 {
					err = fmt.Errorf("sentinel %s knows %d other sentinels", addr, len(others))
				}
			}
			_ = sc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// MasterAddr asks the Sentinels which address is the master now.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, addr := range g.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
		hp, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel names a master: %w", last)
}

// WaitPromoted waits until the Sentinels name a master other than old and
// it answers as a master; it returns the new master's address.
func (g *SentinelGroup) WaitPromoted(ctx context.Context, old string, timeout time.Duration) (string, error) {
	var now string
	err := WaitFor(ctx, timeout, func() error {
		addr, err := g.MasterAddr(ctx)
		if err != nil {
			return err
		}
		if addr == old {
			return errors.New("the old master is still named")
		}
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s is not a master yet", addr)
		}
		now = addr
		return nil
	})
	return now, err
}

// Stop stops every process of the group.
func (g *SentinelGroup) Stop() {
	for _, s := range g.Sentinels {
		s.Stop(2 * time.Second)
	}
	for _, r := range []*Redis{g.Master, g.Replica} {
		if r != nil {
			r.Stop(2 * time.Second)
		}
	}
}

// Cluster is a Redis Cluster of masters, each with Replicas replicas
// (0 or more), on loopback.
type Cluster struct {
	Nodes []*Redis
	Addrs []string
}

// StartCluster starts masters*(1+replicas) cluster-enabled nodes under dir,
// joins them with `redis-cli --cluster create` and waits until every node
// reports cluster_state:ok and every replica is in sync. Node timeout is one second, so a killed master
// is replaced by its replica within a few seconds.
func StartCluster(ctx context.Context, dir string, masters, replicas int) (*Cluster, error) {
	cli, err := CLIBinary()
	if err != nil {
		return nil, err
	}
	n := masters * (1 + replicas)
	// Each node's cluster bus gets a free port of its own: by default it
	// is the client port + 10000, which nobody checked was free (a CI run
	// failed on exactly that: "Failed listening on port 36392 (cluster)").
	// --cluster-port needs Redis 7.0 or later: the project requires Redis 7
	// (Debian's, installed by `make redis`).
	addrs := MustFreeAddrs(2 * n)
	c := &Cluster{Addrs: addrs[:n]}
	for i, addr := range c.Addrs {
		_, busPort, _ := net.SplitHostPort(addrs[n+i])
		r, err := startRedisArgs(ctx, "redis cluster node", filepath.Join(dir, fmt.Sprintf("node-%d", i)), addr,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
			"--cluster-require-full-coverage", "no", "--cluster-port", busPort)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, r)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = procAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitOK(ctx, 20*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	// A replica that never finished its first sync cannot take over.
	if err := WaitFor(ctx, 20*time.Second, c.replicasInSync); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) replicasInSync() error {
	for _, r := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		info, err := rc.Info(context.Background(), "replication").Result()
		_ = rc.Close()
		if err != nil {
			return err
		}
		if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync yet", r.Addr)
		}
	}
	return nil
}

// WaitOK waits until every running node reports cluster_state:ok and a
// master for all 16384 slots.
func (c *Cluster) WaitOK(ctx context.Context, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func() error {
		for _, r := range c.Nodes {
			if r.Exited() {
				continue
			}
			rc := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
			info, err := rc.ClusterInfo(ctx).Result()
			_ = rc.Close()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return fmt.Errorf("node %s: cluster not ok yet", r.Addr)
			}
		}
		return nil
	})
}

// MasterFor returns the node serving key's slot now.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*Redis, error) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRetries: -1})
	defer cc.Close()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	addr := node.Options().Addr
	for _, r := range c.Nodes {
		if r.Addr == addr {
			return r, nil
		}
	}
	return nil, fmt.Errorf("master %s of %q is not one of the cluster's nodes", addr, key)
}

// ReplicaOf returns a replica of master.
func (c *Cluster) ReplicaOf(ctx context.Context, master *Redis) (*Redis, error) {
	rc := redis.NewClient(&redis.Options{Addr: master.Addr, MaxRetries: -1})
	defer rc.Close()
	info, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	for _, r := range c.Nodes {
		_, port, _ := net.SplitHostPort(r.Addr)
		if strings.Contains(info, ",port="+port+",") {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%s has no replica among the nodes", master.Addr)
}

// WaitTakenOver waits until a node other than old serves key's slot and
// the cluster is whole again; it returns the new master.
func (c *Cluster) WaitTakenOver(ctx context.Context, key string, old *Redis, timeout time.Duration) (*Redis, error) {
	var now *Redis
	err := WaitFor(ctx, timeout, func() error {
		m, err := c.MasterFor(ctx, key)
		if err != nil {
			return err
		}
		if m == old {
			return errors.New("the old master still serves the slot")
		}
		now = m
		return c.WaitOK(ctx, 0)
	})
	return now, err
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, r := range c.Nodes {
		r.Stop(2 * time.Second)
	}
}
