// Package admintest serves the router's admin API over a fleet a test
// describes, for the unit tests of the clients that talk to it (the
// operator commands). The service, its HTTP routes and the gRPC server are
// the real ones of package admin, on one loopback port told apart by
// content type as the router does; only the fleet behind them (the store,
// the scheduler's snapshot and the decision log) is a fake the test fills
// with state and scheduler values.
package admintest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/llm-router/llm-router/internal/admin"
	"github.com/llm-router/llm-router/internal/decisions"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Replica is the replica id the served API reports.
const Replica = "replica-a"

// Fleet is the router's state behind the admin API: what the store and the
// scheduler would hold. Its methods are safe for concurrent use; change its
// fields only before Serve or through Update.
type Fleet struct {
	mu           sync.Mutex
	Workers      []state.Worker
	Queues       []state.QueueDepth
	StrategyName string
	Terms        map[string][]scheduler.ModelTerm
	Decisions    map[string]*scheduler.Decision
	// StoreErr, when set, fails every change and every explain (the
	// store unreachable).
	StoreErr error
	// OnRead, when set, runs under the lock before each read of the
	// workers: a test moves the fleet on (a drained worker's requests
	// finish) as the reads of a poll see it.
	OnRead func(f *Fleet)
}

var (
	_ state.Fleet     = (*Fleet)(nil)
	_ admin.Fleet     = (*Fleet)(nil)
	_ admin.Source    = (*Fleet)(nil)
	_ admin.Status    = (*Fleet)(nil)
	_ admin.Explainer = (*Fleet)(nil)
)

// Update changes the fleet under its lock.
func (f *Fleet) Update(change func(f *Fleet)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// Snapshot returns a copy of the workers and queues.
func (f *Fleet) Snapshot() state.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.OnRead != nil {
		f.OnRead(f)
	}
	return state.Snapshot{Workers: slices.Clone(f.Workers), Queues: slices.Clone(f.Queues), At: time.Now()}
}

// Strategy is the configured strategy's name (scored when unset).
func (f *Fleet) Strategy() string {
	if f.StrategyName == "" {
		return "scored"
	}
	return f.StrategyName
}

// Refresh has nothing to reread.
func (f *Fleet) Refresh(context.Context) error { return nil }

// LastScoreTerms returns Terms.
func (f *Fleet) LastScoreTerms() map[string][]scheduler.ModelTerm {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Terms
}

// Status is "ok".
func (f *Fleet) Status() string { return "ok" }

// Auth says API keys are not checked.
func (f *Fleet) Auth() string { return "none" }

// Explain returns the decision kept for requestID, or one wrapping
// decisions.ErrNotFound.
func (f *Fleet) Explain(_ context.Context, requestID string) (*scheduler.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.StoreErr != nil { // the shared decision log is in the store
		return nil, f.StoreErr
	}
	if d, ok := f.Decisions[requestID]; ok {
		return d, nil
	}
	return nil, decisions.ErrNotFound
}

func (f *Fleet) find(id string) (*state.Worker, error) {
	if f.StoreErr != nil {
		return nil, f.StoreErr
	}
	for i := range f.Workers {
		if f.Workers[i].Spec.ID == id {
			return &f.Workers[i], nil
		}
	}
	return nil, state.ErrUnknownWorker
}

// Register adds specs (or refreshes them) as workers from the config.
func (f *Fleet) Register(_ context.Context, specs []state.WorkerSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.StoreErr != nil {
		return f.StoreErr
	}
	for _, spec := range specs {
		w, err := f.find(spec.ID)
		if errors.Is(err, state.ErrUnknownWorker) {
			f.Workers = append(f.Workers, state.Worker{Health: scoring.Healthy})
			w = &f.Workers[len(f.Workers)-1]
		}
		w.Spec = spec
	}
	return nil
}

// SetHealth records a worker's health.
func (f *Fleet) SetHealth(_ context.Context, id string, health scoring.Health) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.find(id)
	if err != nil {
		return err
	}
	w.Health = health
	return nil
}

// RegisterLeased adds spec (or refreshes it) as a registered worker.
func (f *Fleet) RegisterLeased(_ context.Context, spec state.WorkerSpec, lease time.Duration) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.StoreErr != nil {
		return time.Time{}, f.StoreErr
	}
	exp := time.Now().Add(lease)
	w, err := f.find(spec.ID)
	if errors.Is(err, state.ErrUnknownWorker) {
		f.Workers = append(f.Workers, state.Worker{Health: scoring.Healthy})
		w = &f.Workers[len(f.Workers)-1]
	}
	w.Spec, w.Registered, w.LeaseExpires = spec, true, exp
	return exp, nil
}

// Heartbeat extends a worker's lease.
func (f *Fleet) Heartbeat(_ context.Context, id string, lease time.Duration) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.find(id)
	if err != nil {
		return time.Time{}, err
	}
	w.LeaseExpires = time.Now().Add(lease)
	return w.LeaseExpires, nil
}

// Deregister removes a worker.
func (f *Fleet) Deregister(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.find(id); err != nil {
		return err
	}
	f.Workers = slices.DeleteFunc(f.Workers, func(w state.Worker) bool { return w.Spec.ID == id })
	return nil
}

// SetDraining drains or undrains a worker.
func (f *Fleet) SetDraining(_ context.Context, id string, draining bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.find(id)
	if err != nil {
		return err
	}
	w.Draining = draining
	return nil
}

// Serve serves the admin API over f on a loopback port until the test
// ends: gRPC (HTTP/2 without TLS) and HTTP/JSON on one port, changes
// allowed with token. The workers not registered count as the config
// file's.
func Serve(t testing.TB, f *Fleet, token string) *httptest.Server {
	t.Helper()
	var configIDs []string
	for _, w := range f.Workers {
		if !w.Registered {
			configIDs = append(configIDs, w.Spec.ID)
		}
	}
	svc := admin.New(f, f, f, admin.Options{
		Replica: Replica, Token: token, Dynamic: true, ConfigWorkers: configIDs, Status: f.Status,
	})
	gs := grpc.NewServer()
	pb.RegisterAdminServiceServer(gs, svc)
	mux := admin.Handler(f, f, f, Replica, prometheus.NewRegistry())
	if err := svc.Routes(mux); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &protocols
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		gs.Stop()
	})
	return srv
}
