// Package fairness is the fair-queue benchmark (llm-bench fairness): the
// scenarios of the Virtual Token Counter paper (Sheng et al., "Fairness in
// Serving Large Language Models", OSDI 2024) played through three router
// replicas in front of an overloaded fleet, in virtual time, under three
// dispatchers: llm-router's fair queue (the in-memory store the replicas
// share, whose order the Redis scripts reproduce), the same store with
// every request of one tenant (first come, first served), and an emulation
// of llm-d's flow control, which round-robins tenants within each replica's
// own queue.
//
// The fleet is a virtual-time model, not the GPU simulator: each worker
// runs up to Cap requests at once, each for a fixed time set by its
// tokens. What is measured is who is dispatched when, which the model
// does not change; docs/fairness.md says how to read the figures.
package fairness

import (
	"fmt"
	"time"
)

// Tenant is one client of a scenario.
type Tenant struct {
	Name string
	// Rate is its Poisson arrival rate while on, in requests per second.
	Rate float64
	// On and Off, both set, alternate bursts (Rate) and silences, on
	// first.
	On, Off time.Duration
	// Input and Output are each request's prompt and output tokens.
	Input, Output int
	// Weight is its share (0: 1).
	Weight float64
}

// Scenario is one workload on one fleet.
type Scenario struct {
	Name    string
	Tenants []Tenant
	Workers int // each of Cap slots
	Cap     int
	// Duration is the run's length, Warmup the part left out of figures.
	Duration, Warmup time.Duration
	// Pairs are the tenant pairs (indices) whose service difference is
	// measured while both are backlogged.
	Pairs [][2]int
}

// The worker model: a request holds a slot for ttftBase + Input/prefillRate
// + Output·tpot.
const (
	ttftBase    = 50 * time.Millisecond
	prefillRate = 8000.0 // tokens/s
	tpot        = 20 * time.Millisecond
	replicas    = 3
	connections = 2 // per tenant, each pinned to a replica
)

// serviceTime is how long a request holds its slot.
func serviceTime(in, out int) time.Duration {
	return ttftBase + time.Duration(float64(in)/prefillRate*float64(time.Second)) + time.Duration(out)*tpot
}

// Scenarios are VTC's, scaled to a fleet of 4-slot workers whose requests
// (256 in, 256 out) take 5.2 s: 3 workers serve 2.3 requests/s, 2 serve
// 1.5.
func Scenarios() []Scenario {
	const in, out = 256, 256
	return []Scenario{
		{
			Name: "two", Workers: 3, Cap: 4, Duration: 10 * time.Minute, Warmup: time.Minute,
			Tenants: []Tenant{{Name: "a", Rate: 1.5, Input: in, Output: out}, {Name: "b", Rate: 3, Input: in, Output: out}},
			Pairs:   [][2]int{{0, 1}},
		},
		{
			Name: "three", Workers: 2, Cap: 4, Duration: 10 * time.Minute, Warmup: time.Minute,
			Tenants: []Tenant{
				{Name: "a", Rate: 0.25, Input: in, Output: out},
				{Name: "b", Rate: 0.5, Input: in, Output: out},
				{Name: "c", Rate: 1.5, Input: in, Output: out},
			},
		},
		{
			Name: "onoff", Workers: 3, Cap: 4, Duration: 10 * time.Minute, Warmup: time.Minute,
			Tenants: []Tenant{
				{Name: "a", Rate: 1.5, Input: in, Output: out},
				{Name: "b", Rate: 3, On: time.Minute, Off: time.Minute, Input: in, Output: out},
			},
			Pairs: [][2]int{{0, 1}},
		},
	}
}

// Validate names the first bad field.
func (s Scenario) Validate() error {
	switch {
	case len(s.Tenants) == 0:
		return fmt.Errorf("scenario %s: no tenants", s.Name)
	case s.Workers <= 0 || s.Cap <= 0:
		return fmt.Errorf("scenario %s: workers and cap must be positive", s.Name)
	case s.Duration <= s.Warmup:
		return fmt.Errorf("scenario %s: duration must exceed the warm-up", s.Name)
	}
	for _, t := range s.Tenants {
		if t.Rate <= 0 || t.Input < 0 || t.Output < 0 {
			return fmt.Errorf("scenario %s: tenant %s: rate must be positive, tokens not negative", s.Name, t.Name)
		}
	}
	return nil
}

// on reports whether tenant t is sending at d since the start.
func (t Tenant) on(d time.Duration) bool {
	if t.On <= 0 || t.Off <= 0 {
		return true
	}
	return d%(t.On+t.Off) < t.On
}

func (t Tenant) weight() float64 {
	if t.Weight <= 0 {
		return 1
	}
	return t.Weight
}
