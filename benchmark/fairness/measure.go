package fairness

import (
	"math"
	"slices"
)

// Figures are what one run measured after warm-up.
type Figures struct {
	// Rate is each tenant's dispatched requests per second; Demand its
	// arrivals per second.
	Rate, Demand []float64
	// Service is each tenant's dispatched service per second: tokens
	// (input + 2 x output) over weight.
	Service []float64
	// WaitMean and WaitP90 are each tenant's queue waits in seconds, of
	// the requests dispatched after warm-up.
	WaitMean, WaitP90 []float64
	// Jain is Jain's index of each tenant's rate over its max-min fair
	// share of what was served (water-filling the demands): 1 when every
	// tenant got its fair share.
	Jain float64
	// Spread is, over each measured pair, the largest difference between
	// the two tenants' weighted service over any interval after warm-up
	// in which both are backlogged, in units of VTC's bound 2U (U: the
	// largest request's weighted cost): VTC holds it under 1, the aim is
	// 2.
	Spread float64
}

func measure(x *run) Figures {
	sc := x.sc
	n := len(sc.Tenants)
	span := (sc.Duration - sc.Warmup).Seconds()
	f := Figures{Rate: make([]float64, n), Demand: make([]float64, n), Service: make([]float64, n), WaitMean: make([]float64, n), WaitP90: make([]float64, n)}
	for _, r := range x.reqs {
		if r.arrive >= sc.Warmup {
			f.Demand[r.tenant] += 1 / span
		}
	}
	waits := make([][]float64, n)
	for _, r := range x.started {
		if r.start < sc.Warmup {
			continue
		}
		t := sc.Tenants[r.tenant]
		f.Rate[r.tenant] += 1 / span
		f.Service[r.tenant] += cost(t, r) / span
		waits[r.tenant] = append(waits[r.tenant], (r.start - r.arrive).Seconds())
	}
	for i, w := range waits {
		if len(w) == 0 {
			continue
		}
		slices.Sort(w)
		sum := 0.0
		for _, v := range w {
			sum += v
		}
		f.WaitMean[i] = sum / float64(len(w))
		f.WaitP90[i] = w[int(math.Ceil(0.9*float64(len(w))))-1]
	}
	f.Jain = jain(f.Rate, fairShares(f.Demand, sum(f.Rate)))
	u := 0.0
	for _, t := range sc.Tenants {
		u = math.Max(u, float64(t.Input+2*t.Output)/t.weight())
	}
	for _, p := range sc.Pairs {
		f.Spread = math.Max(f.Spread, spread(x, p)/(2*u))
	}
	return f
}

func cost(t Tenant, r *request) float64 { return float64(r.in+2*r.out) / t.weight() }

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// fairShares water-fills capacity over demands: max-min fairness.
func fairShares(demand []float64, capacity float64) []float64 {
	share := make([]float64, len(demand))
	left := slices.Clone(demand)
	for capacity > 1e-12 {
		active := 0
		for _, d := range left {
			if d > 1e-12 {
				active++
			}
		}
		if active == 0 {
			break
		}
		each := capacity / float64(active)
		for i, d := range left {
			if d <= 1e-12 {
				continue
			}
			g := math.Min(each, d)
			share[i] += g
			left[i] -= g
			capacity -= g
		}
	}
	return share
}

// jain is Jain's index of got over want, tenants with no fair share left
// out.
func jain(got, want []float64) float64 {
	var s, sq float64
	n := 0
	for i := range got {
		if want[i] <= 0 {
			continue
		}
		x := got[i] / want[i]
		s, sq, n = s+x, sq+x*x, n+1
	}
	if n == 0 || sq == 0 {
		return 0
	}
	return s * s / (float64(n) * sq)
}

// spread is the largest |W_a(t1,t2) - W_b(t1,t2)| of pair p over the
// intervals after warm-up in which both are backlogged (each had a waiter
// at every dispatch): the range of the running difference of their
// dispatched weighted service within each interval.
func spread(x *run, p [2]int) float64 {
	a, b := x.sc.Tenants[p[0]], x.sc.Tenants[p[1]]
	arrived := make([]int, len(x.sc.Tenants))
	dispatched := make([]int, len(x.sc.Tenants))
	next := 0
	worst, diff, lo, hi := 0.0, 0.0, 0.0, 0.0
	in := false
	for _, r := range x.started {
		for next < len(x.reqs) && x.reqs[next].arrive <= r.start {
			arrived[x.reqs[next].tenant]++
			next++
		}
		both := arrived[p[0]] > dispatched[p[0]] && arrived[p[1]] > dispatched[p[1]]
		dispatched[r.tenant]++
		if r.start < x.sc.Warmup || !both {
			in = false
			continue
		}
		if !in {
			diff, lo, hi, in = 0, 0, 0, true // a new interval
		}
		switch r.tenant {
		case p[0]:
			diff += cost(a, r)
		case p[1]:
			diff -= cost(b, r)
		default:
			continue
		}
		lo, hi = math.Min(lo, diff), math.Max(hi, diff)
		worst = math.Max(worst, hi-lo)
	}
	return worst
}
