package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/test/stack"
)

// Scenario is one fault injected into a running stack under load.
type Scenario struct {
	Name  string
	Fault string // what is done, for the report
	// Recovery says what the recovery time measures.
	Recovery string
	// redis is the topology the scenario runs on (default: one server).
	redis string
	// exactCounts: every in-flight count must read 0 as soon as the load
	// stops, before a lapsing claim lease could hide a leaked claim.
	exactCounts bool
	inject      func(ctx context.Context, s *Stack, l *load, t *timeline) error
	judge       func(r *Result, out []outcome, t *timeline)
}

// timeline is what a scenario marked while it ran.
type timeline struct {
	fault     time.Time // the fault was injected
	detected  time.Time // the system noticed (zero: never)
	recoverAt time.Time // recovery counts from here (zero: the fault)
	recovered time.Time // the system was whole again (zero: never)
	notes     []string  // facts for the report
	// kill-worker's long streams on the victim: how each ended.
	probeErrs  []string
	probeClean int
	seen       map[string]bool
	steady     time.Duration // how long to keep the load on after each step
}

func (t *timeline) notef(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// Scenarios lists every scenario in the order `make chaos` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name: "kill-one-router", Fault: "kill -9 one of 3 router replicas",
			Recovery: "kill until Envoy marks the replica unhealthy",
			inject:   killOneRouter, judge: judgeKillOne,
		},
		{
			Name: "restart-routers", Fault: "rolling restart (SIGTERM) of the 3 router replicas",
			Recovery: "slowest SIGTERM until the replica exited",
			inject:   restartRouters, judge: judgeRestart,
		},
		{
			Name: "kill-all-routers", Fault: "kill -9 every router replica, then restart one",
			Recovery: "restart until requests are routed by the router again",
			inject:   killAllRouters, judge: judgeKillAll,
		},
		{
			Name: "kill-redis", Fault: "kill -9 Redis, restart it empty after 3s",
			Recovery: "restart until every replica reports ok",
			inject:   killRedis, judge: judgeRedis,
		},
		redisFailoverScenarios()[0],
		redisFailoverScenarios()[1],
		{
			Name: "kill-worker", Fault: "kill -9 one of 3 model-a workers, restart it after 3s",
			Recovery: "kill until the shared state marks it unhealthy",
			inject:   killWorker, judge: judgeKillWorker,
		},
		{
			Name: "slow-worker", Fault: "one of 3 model-a workers 10x slower",
			Recovery: "slowdown until its share of a 1s window halves",
			inject:   slowWorker, judge: judgeSlowWorker,
		},
	}
}

// sleep waits d or until ctx ends: the windows a scenario holds the load
// on for (steady state, the fault's length), which its judge measures.
// Waiting for something to happen is pollUntil's.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

var errNotYet = errors.New("not yet")

// pollUntil waits, as stack.WaitFor does, until ok holds or timeout passes,
// and returns when it held (zero: never).
func pollUntil(ctx context.Context, timeout time.Duration, ok func() bool) time.Time {
	err := stack.WaitFor(ctx, timeout, func() error {
		if ok() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		return time.Time{}
	}
	return time.Now()
}

func killOneRouter(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	addr := s.cfgs[0].ExtProcListen
	t.fault = time.Now()
	s.KillRouter(0)
	t.detected = pollUntil(ctx, 10*time.Second, func() bool {
		hosts, err := s.extprocHosts()
		return err == nil && !hosts[addr]
	})
	t.recovered = t.detected
	sleep(ctx, t.steady)
	restart := time.Now()
	if err := s.StartRouter(ctx, 0); err != nil {
		return err
	}
	if err := s.WaitExtProcHealthy(ctx, 10*time.Second); err != nil {
		return err
	}
	t.notef("restarted replica back in Envoy's rotation %s after its start", ms(time.Since(restart)))
	sleep(ctx, t.steady/2)
	return nil
}

func judgeKillOne(r *Result, out []outcome, t *timeline) {
	r.check("at most 0.1% of requests fail", r.Failed*1000 <= r.Sent, fmt.Sprintf("%d of %d", r.Failed, r.Sent))
	after := 0
	for _, o := range out {
		if !t.detected.IsZero() && o.start.After(t.detected) && !o.ok() {
			after++
		}
	}
	r.check("Envoy notices the dead replica", !t.detected.IsZero(), "")
	r.check("no failure after Envoy noticed", after == 0, fmt.Sprintf("%d failed after", after))
	r.FailedAfterRecovery = after
	r.FailOpen = countIf(out, func(o outcome) bool { return o.failOpen })
}

// restartRouters stops each replica gracefully in turn, as a rolling
// deploy does, and starts it again once it has exited.
func restartRouters(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	t.fault = time.Now()
	var slowest time.Duration
	for i := range s.Routers {
		start := time.Now()
		if err := s.Routers[i].Signal(syscall.SIGTERM); err != nil {
			return err
		}
		select {
		case <-s.Routers[i].Done():
		case <-time.After(s.cfgs[i].ShutdownDelay.D() + s.cfgs[i].ShutdownGrace.D() + 5*time.Second):
			return fmt.Errorf("replica %d did not exit after SIGTERM", i)
		}
		slowest = max(slowest, time.Since(start))
		if err := s.StartRouter(ctx, i); err != nil {
			return err
		}
		if err := s.WaitExtProcHealthy(ctx, 10*time.Second); err != nil {
			return err
		}
		sleep(ctx, 500*time.Millisecond) // the rollout's pace: traffic on each restarted replica
	}
	t.recovered = t.fault.Add(slowest)
	t.notef("each replica turned NOT_SERVING, kept serving for shutdown_delay %s, then exited", s.cfgs[0].ShutdownDelay)
	sleep(ctx, t.steady/2)
	return nil
}

func judgeRestart(r *Result, out []outcome, _ *timeline) {
	open := countIf(out, func(o outcome) bool { return o.failOpen })
	r.FailOpen = open
	r.check("zero failed requests", r.Failed == 0, fmt.Sprintf("%d failed", r.Failed))
	r.check("every request decided by a router (none fail-open)", open == 0, fmt.Sprintf("%d fail-open", open))
}

func killAllRouters(ctx context.Context, s *Stack, l *load, t *timeline) error {
	t.fault = time.Now()
	for i := range s.Routers {
		s.KillRouter(i)
	}
	t.detected = pollUntil(ctx, 10*time.Second, func() bool {
		hosts, err := s.extprocHosts()
		if err != nil {
			return false
		}
		for _, up := range hosts {
			if up {
				return false
			}
		}
		return true
	})
	sleep(ctx, t.steady)
	restart := time.Now()
	t.notef("restarting replica 0 at +%s", ms(restart.Sub(t.fault)))
	if err := s.StartRouter(ctx, 0); err != nil {
		return err
	}
	// Recovered: the first request sent after the restart that the router
	// decided (no fail-open mark).
	pollUntil(ctx, 15*time.Second, func() bool {
		for _, o := range l.snapshot() {
			if o.start.After(restart) && o.ok() && !o.failOpen {
				t.recovered = o.end
				return true
			}
		}
		return false
	})
	t.recoverAt = restart
	sleep(ctx, t.steady/2)
	return nil
}

func judgeKillAll(r *Result, out []outcome, t *timeline) {
	open, wrong := 0, 0
	for _, o := range out {
		if !o.failOpen || !o.ok() {
			continue
		}
		open++
		if !strings.HasPrefix(o.served, strings.TrimPrefix(o.model, "model-")+"-") || o.node != o.served {
			wrong++
		}
	}
	r.FailOpen = open
	r.check("at most 0.1% of requests fail", r.Failed*1000 <= r.Sent, fmt.Sprintf("%d of %d", r.Failed, r.Sent))
	r.check("served while no router runs (fail-open)", open > 0, fmt.Sprintf("%d fail-open", open))
	r.check("fail-open keeps routing by model", wrong == 0, fmt.Sprintf("%d to a wrong worker", wrong))
	r.check("routing recovers when a replica returns", !t.recovered.IsZero(), "")
	late := 0
	for _, o := range out {
		if !t.recovered.IsZero() && o.start.After(t.recovered.Add(time.Second)) && o.failOpen {
			late++
		}
	}
	r.check("routed by the router again after recovery", late == 0, fmt.Sprintf("%d fail-open later than 1s after", late))
}

func killRedis(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	t.fault = time.Now()
	s.Redis.Kill()
	t.detected = pollUntil(ctx, 5*time.Second, func() bool {
		for i := range s.Routers {
			if s.Health(i) == "degraded" {
				return true
			}
		}
		return false
	})
	t.seen["degraded"] = !t.detected.IsZero()
	sleep(ctx, 3*time.Second-time.Since(t.fault))
	restart := time.Now()
	r, err := s.Redis.Restart(ctx)
	if err != nil {
		return err
	}
	s.Redis = r
	t.recoverAt = restart
	t.recovered = pollUntil(ctx, 15*time.Second, func() bool {
		for i := range s.Routers {
			if s.Health(i) != "ok" {
				return false
			}
		}
		return true
	})
	// Reconciled: the fresh Redis knows every worker again.
	if snap, err := s.Snapshot(ctx); err == nil {
		t.seen["reconciled"] = len(snap.Workers) == len(s.Workers)
		t.notef("fresh Redis holds %d of %d workers after reconcile", len(snap.Workers), len(s.Workers))
	}
	sleep(ctx, t.steady)
	return nil
}

func judgeRedis(r *Result, _ []outcome, t *timeline) {
	r.check("zero failed requests", r.Failed == 0, fmt.Sprintf("%d failed", r.Failed))
	r.check("degraded mode shown on /health", t.seen["degraded"], "")
	r.check("every replica back to ok", !t.recovered.IsZero(), "")
	r.check("state reconciled into the fresh Redis", t.seen["reconciled"], "")
}

const victim = "a-1"

func killWorker(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	// Make sure streams are in flight on the victim when it dies: long
	// streams through Envoy until some land on it (x-routed-node arrives
	// with the headers); the others are dropped.
	probes, err := openProbes(ctx, s.URL, victim, 12)
	if err != nil {
		return err
	}
	results := make(chan string, len(probes))
	for _, p := range probes {
		go func() { results <- p.finish() }()
	}
	t.fault = time.Now()
	s.Workers[victim].Kill()
	for range probes {
		select {
		case e := <-results:
			if e == "" {
				t.probeClean++
			} else {
				t.probeErrs = append(t.probeErrs, e)
			}
		case <-time.After(20 * time.Second):
			t.probeClean++ // never ended: as bad as a silent end
		}
	}
	t.detected = pollUntil(ctx, 10*time.Second, func() bool { return s.WorkerHealth(ctx, victim) == scoring.Unhealthy })
	t.recovered = t.detected
	sleep(ctx, 3*time.Second-time.Since(t.fault))
	restart := time.Now()
	if err := s.RestartWorker(ctx, victim); err != nil {
		return err
	}
	back := pollUntil(ctx, 15*time.Second, func() bool { return s.WorkerHealth(ctx, victim) == scoring.Healthy })
	if !back.IsZero() {
		t.notef("restarted worker healthy again %s after its start", ms(back.Sub(restart)))
	}
	sleep(ctx, t.steady)
	return nil
}

func judgeKillWorker(r *Result, out []outcome, t *timeline) {
	plain, unclear := 0, 0
	var errs []string
	for _, o := range out {
		if o.ok() {
			continue
		}
		switch {
		case !o.stream:
			plain++
		case o.err == "" && o.status == 200:
			unclear++ // a stream that just stopped, with no error
		default:
			errs = append(errs, o.err)
		}
	}
	for e, n := range countStrings(errs) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d cut stream(s) ended with the client error %q", n, e))
	}
	r.check("zero failed non-streaming requests", plain == 0, fmt.Sprintf("%d failed", plain))
	r.check("cut streams end with an error", unclear == 0, fmt.Sprintf("%d of %d cut streams ended silently", unclear, r.Cut))
	r.check("streams in flight on the worker end with an error", len(t.probeErrs) > 0 && t.probeClean == 0,
		fmt.Sprintf("%d long streams on %s at the kill: %d ended with an error, %d without", len(t.probeErrs)+t.probeClean, victim, len(t.probeErrs), t.probeClean))
	for e, n := range countStrings(t.probeErrs) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d stream(s) on the killed worker ended with the client error %q", n, e))
	}
	r.check("the worker is marked unhealthy", !t.detected.IsZero(), "")
}

const slowID = "a-2"

func slowWorker(ctx context.Context, s *Stack, _ *load, t *timeline) error {
	sleep(ctx, 2*time.Second) // a baseline on top of the warm-up
	t.fault = time.Now()
	resp, err := http.Post("http://"+s.Workers[slowID].Addr+"/admin/config", "application/json", strings.NewReader(`{"slowdown":10}`))
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("gpusim slowdown: %s", resp.Status)
	}
	sleep(ctx, 3*t.steady)
	return nil
}

// share is the fraction of model-a requests started in [from, to) that
// slowID served.
func share(out []outcome, from, to time.Time) (float64, int) {
	n, k := 0, 0
	for _, o := range out {
		if o.model != "model-a" || !o.ok() || o.start.Before(from) || !o.start.Before(to) {
			continue
		}
		n++
		if o.served == slowID {
			k++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(k) / float64(n), n
}

func judgeSlowWorker(r *Result, out []outcome, t *timeline) {
	if len(out) == 0 {
		r.check("load ran", false, "")
		return
	}
	first, last := out[0].start, out[0].end
	for _, o := range out {
		if o.start.Before(first) {
			first = o.start
		}
		if o.end.After(last) {
			last = o.end
		}
	}
	before, nb := share(out, first, t.fault)
	// After: once the moving averages have seen the slow requests finish.
	after, na := share(out, t.fault.Add(t.steady), last)
	r.check("its share drops by half or more", nb > 0 && na > 0 && after <= before/2,
		fmt.Sprintf("%.1f%% of %d before, %.1f%% of %d after", 100*before, nb, 100*after, na))
	for from := t.fault; from.Add(time.Second).Before(last); from = from.Add(250 * time.Millisecond) {
		if s, n := share(out, from, from.Add(time.Second)); n >= 10 && s <= before/2 {
			t.recovered = from.Add(time.Second)
			break
		}
	}
	r.Share = &Share{Before: before, After: after}
	r.Failed = countIf(out, func(o outcome) bool { return !o.ok() })
	r.check("zero failed requests", r.Failed == 0, fmt.Sprintf("%d failed", r.Failed))
}

func countStrings(xs []string) map[string]int {
	out := map[string]int{}
	for _, x := range xs {
		out[x]++
	}
	return out
}

func countIf(out []outcome, f func(outcome) bool) int {
	n := 0
	for _, o := range out {
		if f(o) {
			n++
		}
	}
	return n
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
