package fairness

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The dispatchers compared.
const (
	DispatchFair = "llm-router-fair" // the store's fair queue
	DispatchFCFS = "llm-router-fcfs" // the same store, one tenant
	DispatchLLMD = "llm-d-rr"        // llm-d's per-replica round robin
)

// Dispatchers lists them in report order.
func Dispatchers() []string { return []string{DispatchFair, DispatchFCFS, DispatchLLMD} }

// Options choose what runs.
type Options struct {
	Scenarios []Scenario
	Seeds     int
	// Progress, when set, is told of each finished run.
	Progress func(scenario, dispatcher string, seed int)
}

// Result is one scenario under one dispatcher, every seed.
type Result struct {
	Scenario   string    `json:"scenario"`
	Dispatcher string    `json:"dispatcher"`
	Seeds      []Figures `json:"seeds"`
}

// Run plays every scenario under every dispatcher for each seed; a seed
// draws the same arrivals for every dispatcher.
func Run(o Options) ([]Result, error) {
	if o.Seeds <= 0 {
		return nil, fmt.Errorf("seeds must be positive, got %d", o.Seeds)
	}
	var out []Result
	for _, sc := range o.Scenarios {
		if err := sc.Validate(); err != nil {
			return nil, err
		}
		for _, name := range Dispatchers() {
			res := Result{Scenario: sc.Name, Dispatcher: name}
			for seed := range o.Seeds {
				f, err := One(sc, name, uint64(seed))
				if err != nil {
					return nil, err
				}
				res.Seeds = append(res.Seeds, f)
				if o.Progress != nil {
					o.Progress(sc.Name, name, seed)
				}
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// One plays sc under dispatcher name with seed.
func One(sc Scenario, name string, seed uint64) (Figures, error) {
	x, err := Play(sc, name, seed)
	if err != nil {
		return Figures{}, err
	}
	return measure(x), nil
}

// Play runs sc under dispatcher name and returns the run.
func Play(sc Scenario, name string, seed uint64) (*run, error) {
	rng := rand.New(rand.NewPCG(seed, 0xfa1))
	x := &run{sc: sc, reqs: arrivals(sc, rng), inflight: make([]int, sc.Workers)}
	var d dispatcher
	switch name {
	case DispatchFair, DispatchFCFS:
		sd, err := newStoreDispatcher(x, name == DispatchFair)
		if err != nil {
			return nil, err
		}
		d = sd
	case DispatchLLMD:
		d = &llmdDispatcher{x: x, rng: rand.New(rand.NewPCG(seed, 0x11d))}
	default:
		return nil, fmt.Errorf("unknown dispatcher %q (want one of %v)", name, Dispatchers())
	}
	x.play(d)
	return x, nil
}

// Interval is a mean over seeds with its 95 % bootstrap interval (seeds
// drawn with replacement).
type Interval struct {
	Mean, Lo, Hi float64
}

func interval(xs []float64) Interval {
	if len(xs) == 0 {
		return Interval{}
	}
	mean := func(s []float64) float64 { return sum(s) / float64(len(s)) }
	rng := rand.New(rand.NewPCG(uint64(len(xs)), 0xb007))
	reps := make([]float64, 2000)
	draw := make([]float64, len(xs))
	for i := range reps {
		for j := range draw {
			draw[j] = xs[rng.IntN(len(xs))]
		}
		reps[i] = mean(draw)
	}
	slices.Sort(reps)
	return Interval{Mean: mean(xs), Lo: reps[len(reps)*25/1000], Hi: reps[len(reps)*975/1000-1]}
}

// over is the interval of figure f over a result's seeds.
func (r Result) over(f func(Figures) float64) Interval {
	xs := make([]float64, len(r.Seeds))
	for i, s := range r.Seeds {
		xs[i] = f(s)
	}
	return interval(xs)
}
