package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

var errDown = errors.New("store down")

// failingStore answers every call with nothing, and fails claims and
// moves.
type failingStore struct{}

var _ scheduler.Store = failingStore{}

func (failingStore) Snapshot(context.Context) (state.Snapshot, error) { return state.Snapshot{}, nil }

func (failingStore) Claim(context.Context, state.ClaimRequest) (state.ClaimResult, error) {
	return state.ClaimResult{}, errDown
}

func (failingStore) Release(context.Context, state.Release) (bool, error) { return true, nil }
func (failingStore) Renew(context.Context, []string, []string) error      { return nil }
func (failingStore) Move(context.Context, string, string) error           { return errDown }
func (failingStore) FirstToken(context.Context, string) error             { return nil }

func (failingStore) AddLatency(context.Context, []state.LatencyContribution) error { return errDown }

func (failingStore) Cancel(context.Context, string) (state.WaiterStatus, error) {
	return state.WaiterStatus{}, nil
}

func (failingStore) Poll(context.Context, string) (state.WaiterStatus, error) {
	return state.WaiterStatus{}, nil
}

func (failingStore) Pump(context.Context) error { return nil }

func (failingStore) Subscribe(context.Context, string, func(state.Notice)) error { return nil }

func TestCountStoreCountsEveryRoundTripOnce(t *testing.T) {
	m := metrics.New()
	c := m.CountStore(failingStore{})
	ctx := context.Background()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, state.ClaimRequest{ID: "x"}); !errors.Is(err, errDown) {
		t.Fatalf("claim: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = c.Move(cancelled, "x", "w") // the caller gave up: not a store error
	_ = c.Move(ctx, "x", "w")
	_ = c.FirstToken(ctx, "x")
	_ = c.AddLatency(ctx, nil)

	for _, tc := range []struct {
		op          string
		trips, errs float64
	}{
		{"snapshot", 1, 0},
		{"claim", 1, 1},
		{"move", 2, 1},
		{"first_token", 1, 0},
		{"add_latency", 1, 1},
		{"release", 0, 0},
	} {
		if got := value(m.StoreRoundTrips.WithLabelValues(tc.op)); got != tc.trips {
			t.Errorf("%s: %v round trips, want %v", tc.op, got, tc.trips)
		}
		if got := value(m.StoreErrors.WithLabelValues(tc.op)); got != tc.errs {
			t.Errorf("%s: %v errors, want %v", tc.op, got, tc.errs)
		}
	}
}

// value reads a counter or gauge (prometheus/testutil would need a module
// this repository does not list).
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}
