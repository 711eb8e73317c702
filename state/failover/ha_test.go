package failover_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/failover"
	redisstore "github.com/llm-router/llm-router/state/redis"
	"github.com/llm-router/llm-router/test/stack"
)

// haCase is a topology whose master can be killed: the master holding the
// test's keys, the replica that will replace it, and how to wait for that.
type haCase struct {
	opts            func() *redis.UniversalOptions
	master, replica *stack.Redis
	promoted        func(ctx context.Context) error
}

// TestFailoverRepairsLostWrites: Sentinel, or the Cluster itself, promotes a
// replica that lacks the old master's last writes (a release, a claim, a
// move: the replica was frozen and cut off while the master acknowledged
// them). The failover store repairs them from what the router holds: every
// claim counted once, none leaked, none double counted, the global count
// exact.
func TestFailoverRepairsLostWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server, redis-sentinel and redis-cli")
	}
	timeouts := func(o *redis.UniversalOptions) *redis.UniversalOptions {
		o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout = -1, 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
		return o
	}
	t.Run("Sentinel", func(t *testing.T) {
		g := doomedSentinel
		if g.Master.Exited() { // killed by an earlier run (go test -count)
			var err error
			if g, err = stack.StartSentinelGroup(context.Background(), t.TempDir(), "doomed"); err != nil {
				t.Fatal(err)
			}
			defer g.Stop()
		}
		lostWrites(t, haCase{
			opts: func() *redis.UniversalOptions {
				return timeouts(&redis.UniversalOptions{Addrs: g.SentinelAddrs, MasterName: g.MasterName})
			},
			master: g.Master, replica: g.Replica,
			promoted: func(ctx context.Context) error {
				_, err := g.WaitPromoted(ctx, g.Master.Addr, 20*time.Second)
				return err
			},
		})
	})
	t.Run("Cluster", func(t *testing.T) {
		ctx := context.Background()
		c := doomedCluster
		key := "{lost}:workers"
		if anyExited(c) { // killed by an earlier run (go test -count)
			var err error
			if c, err = stack.StartCluster(ctx, t.TempDir(), 3, 1); err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
		}
		master, err := c.MasterFor(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		replica, err := c.ReplicaOf(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		lostWrites(t, haCase{
			opts: func() *redis.UniversalOptions {
				return timeouts(&redis.UniversalOptions{Addrs: c.Addrs, IsClusterMode: true})
			},
			master: master, replica: replica,
			promoted: func(ctx context.Context) error {
				_, err := c.WaitTakenOver(ctx, key, master, 20*time.Second)
				return err
			},
		})
	})
}

func lostWrites(t *testing.T, hc haCase) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := redis.NewUniversalClient(hc.opts())
	defer client.Close()
	var mu sync.Mutex
	var repairs []failover.Repair
	f := failover.New(redisstore.New(client, "lost", state.Limits{Lease: 30 * time.Second}), nil)
	f.OnRepair(func(r failover.Repair) {
		mu.Lock()
		repairs = append(repairs, r)
		mu.Unlock()
	})
	specs := []state.WorkerSpec{{ID: "a", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 8}, {ID: "b", Address: "10.0.0.2:1", Models: []string{"m"}, MaxConcurrency: 8}}
	if err := f.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	cands := []state.Candidate{{Worker: "a", Cap: 8, Slope: 1}, {Worker: "b", Cap: 8, Slope: 1, Base: 0.5}}
	claim := func(id, want string) {
		t.Helper()
		res, err := f.Claim(ctx, state.ClaimRequest{ID: id, Candidates: cands})
		if err != nil || res.Index < 0 || cands[res.Index].Worker != want {
			t.Fatalf("claim %s: %v %+v, want %s", id, err, res, want)
		}
	}
	claim("c1", "a")
	claim("c2", "b")
	claim("c3", "a")
	if _, err := f.Snapshot(ctx); err != nil { // the periodic refresh
		t.Fatal(err)
	}
	master := redis.NewClient(&redis.Options{Addr: hc.master.Addr, MaxRetries: -1})
	defer master.Close()
	if n, err := master.Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("replica not in sync before the freeze: %d %v", n, err)
	}
	f.CheckServer(ctx) // the server that answers before the fault
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go f.Run(runCtx, 50*time.Millisecond)

	// Writes the master acknowledges and the replica never sees: the
	// replica is frozen and its link cut, so they stay in the master's
	// backlog (not even in the socket's buffer) until the master dies.
	if err := hc.replica.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hc.replica.Signal(syscall.SIGCONT) }()
	if err := master.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Release(ctx, state.Release{ID: "c1", Latency: time.Second, Alpha: 0.2}); err != nil || !ok {
		t.Fatalf("release c1: %v %v", ok, err)
	}
	claim("c4", "a")
	if err := f.Move(ctx, "c2", "a"); err != nil {
		t.Fatal(err)
	}
	if f.Degraded() {
		t.Fatal("degraded before the fault")
	}
	hc.master.Kill()
	if err := hc.replica.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := hc.promoted(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted %s after the kill", time.Since(start).Round(time.Millisecond))

	// The promoted replica held a={c1,c3}, b={c2}; the router holds
	// a={c2,c3,c4}.
	check := redis.NewUniversalClient(hc.opts())
	defer check.Close()
	err := stack.WaitFor(ctx, 20*time.Second, func() error {
		if f.Degraded() {
			return fmt.Errorf("still degraded")
		}
		got, err := inflight(ctx, check, "lost")
		if err != nil {
			return err
		}
		if got["a"] != 3 || got["b"] != 0 || got["total"] != 3 {
			return fmt.Errorf("in flight %v, want a 3, b 0, total 3", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("repairs: %+v", repairs)
	var added, dropped int
	for _, r := range repairs {
		added, dropped = added+r.Added, dropped+r.Dropped
	}
	mu.Unlock()
	if added != 1 || dropped != 1 {
		t.Errorf("repairs added %d (want 1: c4) and dropped %d (want 1: c1)", added, dropped)
	}
	for _, id := range []string{"c2", "c3", "c4"} {
		if ok, err := f.Release(ctx, state.Release{ID: id}); err != nil || !ok {
			t.Fatalf("release %s after the failover: %v %v", id, ok, err)
		}
	}
	got, err := inflight(ctx, check, "lost")
	if err != nil || got["a"] != 0 || got["b"] != 0 || got["total"] != 0 {
		t.Fatalf("after releasing everything: %v %v", got, err)
	}
}

// inflight reads each worker's in-flight count and the global count.
func inflight(ctx context.Context, c redis.UniversalClient, prefix string) (map[string]int, error) {
	snap, err := redisstore.New(c, prefix, state.Limits{}).Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, w := range snap.Workers {
		out[w.Spec.ID] = w.InFlight
	}
	total, err := c.Get(ctx, "{"+prefix+"}:total").Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out["total"] = total
	return out, nil
}

// TestFailoverNoticesANewServerWhileIdle: Redis is replaced (here
// restarted empty) between two looks of an idle replica, which therefore
// sees no error; the run_id it watches changes, and it reconciles as after
// an outage: workers restored, its held claim counted again.
func TestFailoverNoticesANewServerWhileIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	ctx := context.Background()
	srv, err := stack.StartRedis(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	// Default retries: the first command on a dead pooled connection is
	// retried on a new one, so the replica never sees an error.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	var repairs []failover.Repair
	f := failover.New(redisstore.New(client, "idle", state.Limits{Lease: 30 * time.Second}), nil)
	f.OnRepair(func(r failover.Repair) { repairs = append(repairs, r) })
	specs := []state.WorkerSpec{{ID: "a", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 4}}
	if err := f.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if res, err := f.Claim(ctx, state.ClaimRequest{ID: "held", Candidates: []state.Candidate{{Worker: "a", Cap: 4, Slope: 1}}}); err != nil || res.Index != 0 {
		t.Fatalf("claim: %v %+v", err, res)
	}
	if _, err := f.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	f.CheckServer(ctx)
	srv.Kill()
	srv2, err := srv.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop(time.Second)
	f.CheckServer(ctx)
	if f.Degraded() {
		t.Fatal("degraded: the test meant the replica to see no error")
	}
	if len(repairs) != 1 || repairs[0].Reason != "failover" || repairs[0].Added != 1 {
		t.Fatalf("repairs %+v, want one failover repair re-adding the held claim", repairs)
	}
	got, err := inflight(ctx, client, "idle")
	if err != nil || got["a"] != 1 || got["total"] != 1 {
		t.Fatalf("in the new server: %v %v", got, err)
	}
	f.CheckServer(ctx) // same server: nothing more to repair
	if len(repairs) != 1 {
		t.Fatalf("repaired again without a change: %+v", repairs)
	}
}

func anyExited(c *stack.Cluster) bool {
	for _, n := range c.Nodes {
		if n.Exited() {
			return true
		}
	}
	return false
}
