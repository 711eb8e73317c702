package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

func runHealth(t *testing.T, newStore Factory, newPeer func(*testing.T, state.Store) state.Store) {
	policy := state.Limits{Lease: 30 * time.Second, Health: state.HealthPolicy{ActiveFailures: 2, PassiveFailures: 3}}
	t.Run("PassiveFailuresMarkUnhealthy", func(t *testing.T) { passiveFailures(t, newStore(t, policy)) })
	t.Run("RecoveryIsHalfOpen", func(t *testing.T) { recovery(t, newStore(t, policy)) })
	t.Run("HoldDownDelaysRecovery", func(t *testing.T) {
		p := policy
		p.Health.HoldDown = time.Hour
		holdDown(t, newStore(t, p))
	})
	t.Run("MonitorLeases", func(t *testing.T) {
		s := newStore(t, policy)
		monitorLeases(t, s, peers(t, s, newPeer, 2)[1])
	})
	t.Run("TelemetryKeepsItsDates", func(t *testing.T) { telemetry(t, newStore(t, policy)) })
}

func health(t *testing.T, s state.Store, id string) scoring.Health {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == id {
			return w.Health
		}
	}
	t.Fatalf("no worker %s", id)
	return ""
}

// passiveFailures: failed requests in a row (and requests Envoy moved away
// from a worker) mark it unhealthy; a success in between resets the count.
func passiveFailures(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(2, 8)
	register(t, s, specs)
	one := candidates(specs)[:1]
	fail := func() {
		id, w := mustClaim(t, s, one)
		if w == "" {
			t.Fatal("no claim")
		}
		if _, err := s.Release(ctx, state.Release{ID: id, Failed: true}); err != nil {
			t.Fatal(err)
		}
	}
	fail()
	fail()
	id, _ := mustClaim(t, s, one)
	_, _ = s.Release(ctx, state.Release{ID: id, Latency: time.Second, Alpha: 0.2}) // resets
	fail()
	fail()
	if h := health(t, s, "w0"); h != scoring.Healthy {
		t.Fatalf("w0 %s after two failures in a row, threshold 3", h)
	}
	// The third failure: Envoy retried the request elsewhere.
	id, _ = mustClaim(t, s, one)
	if err := s.Move(ctx, id, "w1"); err != nil {
		t.Fatal(err)
	}
	if h := health(t, s, "w0"); h != scoring.Unhealthy {
		t.Fatalf("w0 %s after three failures in a row", h)
	}
	if _, w := mustClaim(t, s, one); w != "" {
		t.Fatalf("an unhealthy worker was claimed")
	}
	_, _ = s.Release(ctx, state.Release{ID: id})
}

// recovery: an unhealthy worker passing a check becomes recovering and
// takes one request at a time; serving it makes it healthy.
func recovery(t *testing.T, s state.Store) {
	ctx := context.Background()
	specs := workers(1, 8)
	register(t, s, specs)
	for i := 0; i < 2; i++ {
		if _, err := s.ReportHealth(ctx, "w0", false); err != nil {
			t.Fatal(err)
		}
	}
	if h := health(t, s, "w0"); h != scoring.Unhealthy {
		t.Fatalf("two failed checks: %s", h)
	}
	if h, _ := s.ReportHealth(ctx, "w0", true); h != scoring.Recovering {
		t.Fatalf("a passing check after the hold-down: %s", h)
	}
	probe, w := mustClaim(t, s, candidates(specs))
	if w != "w0" {
		t.Fatal("a recovering worker takes a probe request")
	}
	if _, w2 := mustClaim(t, s, candidates(specs)); w2 != "" {
		t.Fatal("a recovering worker takes one request at a time")
	}
	if _, err := s.Release(ctx, state.Release{ID: probe, Latency: time.Second, Alpha: 0.2}); err != nil {
		t.Fatal(err)
	}
	if h := health(t, s, "w0"); h != scoring.Healthy {
		t.Fatalf("after serving the probe: %s", h)
	}
	// A failed probe sends it straight back.
	for i := 0; i < 2; i++ {
		_, _ = s.ReportHealth(ctx, "w0", false)
	}
	_, _ = s.ReportHealth(ctx, "w0", true)
	probe, _ = mustClaim(t, s, candidates(specs))
	_, _ = s.Release(ctx, state.Release{ID: probe, Failed: true})
	if h := health(t, s, "w0"); h != scoring.Unhealthy {
		t.Fatalf("after a failed probe: %s", h)
	}
	if _, err := s.ReportHealth(ctx, "nope", true); err == nil {
		t.Fatal("unknown worker accepted")
	}
}

func holdDown(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 8))
	_, _ = s.ReportHealth(ctx, "w0", false)
	_, _ = s.ReportHealth(ctx, "w0", false)
	if h, _ := s.ReportHealth(ctx, "w0", true); h != scoring.Unhealthy {
		t.Fatalf("recovered within the hold-down: %s", h)
	}
}

// monitorLeases: one replica monitors a worker at a time.
func monitorLeases(t *testing.T, a, b state.Store) {
	ctx := context.Background()
	register(t, a, workers(3, 1))
	ids := []string{"w0", "w1", "w2"}
	mineA, err := a.AcquireMonitors(ctx, "ra", ids, 300*time.Millisecond)
	if err != nil || len(mineA) != 3 {
		t.Fatalf("first replica: %v %v", mineA, err)
	}
	mineB, _ := b.AcquireMonitors(ctx, "rb", ids, 300*time.Millisecond)
	if len(mineB) != 0 {
		t.Fatalf("second replica took leases held by the first: %v", mineB)
	}
	if again, _ := a.AcquireMonitors(ctx, "ra", ids, 300*time.Millisecond); len(again) != 3 {
		t.Fatalf("the holder keeps its leases: %v", again)
	}
	time.Sleep(400 * time.Millisecond) // the first replica stops renewing
	if mineB, _ = b.AcquireMonitors(ctx, "rb", ids, 300*time.Millisecond); len(mineB) != 3 {
		t.Fatalf("leases of a silent replica not taken over: %v", mineB)
	}
}

func telemetry(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 1))
	t0 := time.UnixMilli(time.Now().Add(-time.Second).UnixMilli())
	if err := s.PutTelemetry(ctx, map[string]state.Telemetry{"w0": {
		KVUsage: state.Sample{Value: 0.5, At: t0}, Waiting: state.Sample{Value: 3, At: t0}, At: t0, By: "ra",
		GapMark: state.Sample{Value: 5000, At: t0}, SlowMark: state.Sample{Value: 7, At: t0},
		SlowShare: state.Sample{Value: 0.0025, At: t0},
	}}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(500 * time.Millisecond)
	// The next scrape found no KV metric: the old value keeps its old date.
	if err := s.PutTelemetry(ctx, map[string]state.Telemetry{"w0": {
		Waiting: state.Sample{Value: 1, At: t1}, At: t1, By: "ra", Error: "kv metric missing",
	}}); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot(ctx)
	tm := snap.Workers[0].Telemetry
	if tm.KVUsage.Value != 0.5 || !tm.KVUsage.At.Equal(t0) || tm.Waiting.Value != 1 || !tm.Waiting.At.Equal(t1) ||
		tm.By != "ra" || tm.Error != "kv metric missing" || !tm.At.Equal(t1) {
		t.Fatalf("telemetry %+v", tm)
	}
	// The inter-token window's samples keep theirs too.
	if tm.GapMark.Value != 5000 || tm.SlowMark.Value != 7 || tm.SlowShare.Value != 0.0025 || !tm.SlowShare.At.Equal(t0) {
		t.Fatalf("gap window %+v %+v %+v", tm.GapMark, tm.SlowMark, tm.SlowShare)
	}
}

// registeredWorkers: a worker registered with a lease stays while it
// heartbeats and leaves the fleet when it stops; deregistration is
// immediate; claims on a worker that left still end cleanly.
func registeredWorkers(t *testing.T, s state.Store) {
	ctx := context.Background()
	register(t, s, workers(1, 4))
	dyn := state.WorkerSpec{ID: "dyn", Address: "10.9.9.9:8000", Models: []string{"m"}, MaxConcurrency: 2}
	exp, err := s.RegisterLeased(ctx, dyn, 400*time.Millisecond)
	if err != nil || time.Until(exp) > time.Second || time.Until(exp) < 0 {
		t.Fatalf("register: %v %v", exp, err)
	}
	snap, _ := s.Snapshot(ctx)
	var found state.Worker
	for _, w := range snap.Workers {
		if w.Spec.ID == "dyn" {
			found = w
		}
	}
	if !found.Registered || found.Health != scoring.Healthy || found.LeaseExpires.IsZero() {
		t.Fatalf("registered worker: %+v", found)
	}
	id, w := mustClaim(t, s, []state.Candidate{{Worker: "dyn", Cap: 2}})
	if w != "dyn" {
		t.Fatal("the registered worker takes requests")
	}
	if _, err := s.Heartbeat(ctx, "w0", time.Second); err == nil {
		t.Fatal("a config worker has no lease to extend")
	}
	for i := 0; i < 4; i++ { // heartbeats keep it
		time.Sleep(150 * time.Millisecond)
		if _, err := s.Heartbeat(ctx, "dyn", 400*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) { // heartbeats stop
		if _, ok := inFlight(t, s)["dyn"]; !ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := inFlight(t, s)["dyn"]; ok {
		t.Fatal("a worker whose heartbeats stopped is still registered")
	}
	if _, err := s.Heartbeat(ctx, "dyn", time.Second); err == nil {
		t.Fatal("a gone worker heartbeats")
	}
	if ok, err := s.Release(ctx, state.Release{ID: id}); err != nil || !ok {
		t.Fatalf("the claim on the gone worker: %v %v", ok, err)
	}
	if err := s.Deregister(ctx, "w0"); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.Snapshot(ctx); len(snap.Workers) != 0 {
		t.Fatalf("after deregistering all: %+v", snap.Workers)
	}
	if err := s.Deregister(ctx, "w0"); err == nil {
		t.Fatal("deregistering twice")
	}
}
