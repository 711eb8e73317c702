package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// failingStore is the in-memory store whose claims and moves fail.
type failingStore struct{ *memory.Store }

var errDown = errors.New("store down")

func (failingStore) Claim(context.Context, state.ClaimRequest) (state.ClaimResult, error) {
	return state.ClaimResult{}, errDown
}

func (failingStore) Move(context.Context, string, string) error { return errDown }

func TestCountedStoreCountsEveryRoundTripOnce(t *testing.T) {
	m := metrics.New()
	c := instrument(failingStore{memory.New(nil, state.Limits{})}, m)
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

	for _, tc := range []struct {
		op          string
		trips, errs float64
	}{
		{"snapshot", 1, 0},
		{"claim", 1, 1},
		{"move", 2, 1},
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

// TestAdmitCountsThroughTheDecorator: a scheduler's own calls are counted,
// once each, with no count written by hand.
func TestAdmitCountsThroughTheDecorator(t *testing.T) {
	s, _, _ := newTestScheduler(t, "scored", spec("a", "m", 1))
	before := value(s.m.StoreRoundTrips.WithLabelValues("claim"))
	tk, err := s.Admit(context.Background(), Request{ID: "r", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(Outcome{})
	if got := value(s.m.StoreRoundTrips.WithLabelValues("claim")) - before; got != 1 {
		t.Errorf("%v claim round trips for one admit, want 1", got)
	}
	if got := value(s.m.StoreRoundTrips.WithLabelValues("release")); got != 1 {
		t.Errorf("%v release round trips for one finish, want 1", got)
	}
}

// value reads a counter (prometheus/testutil would need a module this
// repository does not list).
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
