package scoring

import "testing"

func TestAdapterStateOf(t *testing.T) {
	cases := []struct {
		placed              bool
		active, held, slots int
		want                AdapterState
	}{
		{placed: true, active: 2, held: 4, slots: 4, want: AdapterActive},
		{placed: true, active: 0, held: 4, slots: 4, want: AdapterIdle},
		{placed: false, held: 3, slots: 4, want: AdapterFree},
		{placed: false, held: 4, slots: 4, want: AdapterEvict},
		{placed: false, held: 0, slots: 0, want: AdapterFree}, // DefaultMaxLoras
		{placed: false, held: 1, slots: 0, want: AdapterEvict},
	}
	for _, tc := range cases {
		if got := AdapterStateOf(tc.placed, tc.active, tc.held, tc.slots); got != tc.want {
			t.Errorf("AdapterStateOf(%v, %d, %d, %d) = %s; want %s", tc.placed, tc.active, tc.held, tc.slots, got, tc.want)
		}
	}
}

// TestAdapterPricesOrder: every strategy prices active < idle < free <
// evict; predicted in seconds of the worker's load time.
func TestAdapterPricesOrder(t *testing.T) {
	w := Worker{ID: "w", MaxLoras: 4, AdapterLoadSeconds: 1.5}
	for _, name := range []string{Predicted, Scored, LeastLoaded} {
		aw := AdapterWeightsFor(name, w)
		prices := []float64{AdapterScore(aw, AdapterActive), AdapterScore(aw, AdapterIdle), AdapterScore(aw, AdapterFree), AdapterScore(aw, AdapterEvict)}
		for i := 1; i < len(prices); i++ {
			if !(prices[i] > prices[i-1]) {
				t.Errorf("%s: prices %v; want increasing", name, prices)
			}
		}
		if aw.Slots != 4 {
			t.Errorf("%s: slots %d; want the worker's 4", name, aw.Slots)
		}
	}
	if got := AdapterScore(AdapterWeightsFor(Predicted, w), AdapterFree); got != 1.5 {
		t.Errorf("predicted prices a load %g; want the worker's 1.5 s", got)
	}
	if got := AdapterScore(AdapterWeights{Load: 3}, AdapterNone); got != 0 {
		t.Errorf("no adapter priced %g", got)
	}
}

func TestFilterAdapterEligibility(t *testing.T) {
	ws := []Worker{
		{ID: "has", Models: []string{"base"}, Health: Healthy, Adapters: []string{"sql"}},
		{ID: "other", Models: []string{"base"}, Health: Healthy, Adapters: []string{"chat"}},
		{ID: "elsewhere", Models: []string{"m"}, Health: Healthy, Adapters: []string{"sql"}},
		{ID: "down", Models: []string{"base"}, Health: Unhealthy, Adapters: []string{"sql"}},
	}
	el, ex := Filter(Job{Model: "base", Adapter: "sql"}, ws)
	if len(el) != 1 || el[0].ID != "has" || len(ex) != 1 || ex[0].Worker != "down" {
		t.Fatalf("eligible %v, excluded %v; want has, down excluded", el, ex)
	}
	el, _ = Filter(Job{Model: "base"}, ws)
	if len(el) != 2 {
		t.Fatalf("base model eligible on %d workers; want 2", len(el))
	}
}

func TestBuildPricesAdapter(t *testing.T) {
	ws := []Worker{{ID: "a", Models: []string{"base"}, Health: Healthy, Adapters: []string{"sql"}, AdapterLoadSeconds: 2, MaxLoras: 3}}
	plan := Build(mustStrategy(t, Predicted), Input{Job: Job{Model: "base", Adapter: "sql"}, Workers: ws})
	if len(plan.Candidates) != 1 || plan.Candidates[0].Adapter.Load != 2 || plan.Candidates[0].Adapter.Slots != 3 {
		t.Fatalf("candidates %+v; want the adapter priced at a 2 s load, 3 slots", plan.Candidates)
	}
	plan = Build(mustStrategy(t, Predicted), Input{Job: Job{Model: "base"}, Workers: ws})
	if plan.Candidates[0].Adapter != (AdapterWeights{}) {
		t.Fatalf("a request with no adapter priced one: %+v", plan.Candidates[0].Adapter)
	}
	lines := BreakdownLive(plan.Candidates, Prompt{}, []int{0}, nil)
	AddAdapterLines(lines, []Candidate{{Adapter: AdapterWeights{Load: 2}}}, []AdapterState{AdapterFree})
	if lines[0].Adapter != "free_slot" || lines[0].Total != plan.Candidates[0].Curve.At(0)+2 {
		t.Fatalf("line %+v; want free_slot and the load in the total", lines[0])
	}
}

func mustStrategy(t *testing.T, name string) Strategy {
	t.Helper()
	s, err := New(name, Params{Weights: Weights{Active: 100, Terms: DefaultTermWeights()}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
