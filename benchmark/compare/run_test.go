package compare

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/llm-router/llm-router/benchmark/report"
)

// attempts returns an attempt function yielding runs with the given
// slowdowns in turn, and counts the calls.
func attempts(slowdowns ...float64) (func() (*report.Run, error), *int) {
	calls := 0
	return func() (*report.Run, error) {
		r := &report.Run{HostSlowdown: slowdowns[calls]}
		calls++
		return r, nil
	}, &calls
}

func TestSteadyRepeatsOnlyRunsOnASlowHost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slowdowns []float64
		calls     int
		kept      float64
		attempts  []float64
	}{
		{"fast host: once", []float64{1.02}, 1, 1.02, nil},
		{"unmeasured: once", []float64{0}, 1, 0, nil},
		{"slow then fast", []float64{1.3, 1.01}, 2, 1.01, []float64{1.3, 1.01}},
		{"slow throughout: fastest kept", []float64{1.4, 1.2, 1.3}, 3, 1.2, []float64{1.4, 1.2, 1.3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, calls := attempts(tc.slowdowns...)
			budget := 8
			run, err := steady(f, &budget, "x", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if *calls != tc.calls || run.HostSlowdown != tc.kept || !slices.Equal(run.HostAttempts, tc.attempts) {
				t.Fatalf("calls %d kept %.2f attempts %v, want %d %.2f %v", *calls, run.HostSlowdown, run.HostAttempts, tc.calls, tc.kept, tc.attempts)
			}
		})
	}
}

func TestSteadyStopsOnAnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	budget := 8
	_, err := steady(func() (*report.Run, error) { calls++; return nil, boom }, &budget, "x", io.Discard)
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls, want boom after 1", err, calls)
	}
}

func TestSteadyRepeatsWithinTheBudget(t *testing.T) {
	f, calls := attempts(1.5, 1.4, 1.3, 1.5, 1.4, 1.3)
	budget := 3
	if _, err := steady(f, &budget, "x", io.Discard); err != nil {
		t.Fatal(err)
	}
	if *calls != 3 || budget != 1 {
		t.Fatalf("first run: %d calls, budget left %d; want 3 and 1", *calls, budget)
	}
	run, err := steady(f, &budget, "x", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if *calls != 5 || budget != 0 || !run.HostSlow() {
		t.Fatalf("second run: %d calls, budget left %d, slow %v; want 5, 0, slow kept", *calls, budget, run.HostSlow())
	}
}
