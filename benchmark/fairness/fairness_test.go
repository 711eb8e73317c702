package fairness

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestFairQueueBoundsTheGap: on VTC's two-tenant scenario (shortened),
// the store's fair queue keeps the service difference of the two
// backlogged tenants within 2x VTC's bound and serves them alike; first
// come, first served gives the faster sender twice the other's share and
// a difference many times the bound.
func TestFairQueueBoundsTheGap(t *testing.T) {
	sc := Scenarios()[0]
	sc.Duration, sc.Warmup = 4*time.Minute, 40*time.Second
	fair, err := One(sc, DispatchFair, 1)
	if err != nil {
		t.Fatal(err)
	}
	fcfs, err := One(sc, DispatchFCFS, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fair: rates %.2f spread %.2f jain %.3f; fcfs: rates %.2f spread %.2f jain %.3f",
		fair.Rate, fair.Spread, fair.Jain, fcfs.Rate, fcfs.Spread, fcfs.Jain)
	if fair.Spread > 2 || fair.Jain < 0.99 {
		t.Errorf("fair queue: spread %.2f x 2U (aim 2), Jain %.3f", fair.Spread, fair.Jain)
	}
	if fcfs.Spread < 10 || fcfs.Rate[1] < 1.5*fcfs.Rate[0] {
		t.Errorf("fcfs shows no gap: spread %.2f, rates %.2f", fcfs.Spread, fcfs.Rate)
	}
}

// TestLightTenantsGetTheirDemand: with three tenants, the two sending
// under their fair share are served all they send under the fair queue,
// and wait little; under FCFS they wait in the heavy tenant's queue.
func TestLightTenantsGetTheirDemand(t *testing.T) {
	sc := Scenarios()[1]
	sc.Duration, sc.Warmup = 4*time.Minute, 40*time.Second
	fair, err := One(sc, DispatchFair, 2)
	if err != nil {
		t.Fatal(err)
	}
	fcfs, err := One(sc, DispatchFCFS, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if fair.Rate[i] < 0.9*fair.Demand[i] || fair.WaitMean[i] > 10 {
			t.Errorf("fair: tenant %d served %.2f of %.2f req/s, waits %.1fs", i, fair.Rate[i], fair.Demand[i], fair.WaitMean[i])
		}
		if fcfs.WaitMean[i] < 5*fair.WaitMean[i] {
			t.Errorf("fcfs: tenant %d waits %.1fs, fair %.1fs: no gap", i, fcfs.WaitMean[i], fair.WaitMean[i])
		}
	}
}

func TestReportNamesEveryDispatcher(t *testing.T) {
	sc := Scenarios()[2]
	sc.Duration, sc.Warmup = 3*time.Minute, 30*time.Second
	rs, err := Run(Options{Scenarios: []Scenario{sc}, Seeds: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	Markdown(&b, []Scenario{sc}, rs, "test")
	for _, d := range Dispatchers() {
		if !strings.Contains(b.String(), "| "+d+" |") {
			t.Fatalf("no row for %s:\n%s", d, b.String())
		}
	}
}

func TestFairShares(t *testing.T) {
	got := fairShares([]float64{0.25, 0.5, 1.5}, 1.5)
	want := []float64{0.25, 0.5, 0.75}
	for i := range got {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("shares %v, want %v", got, want)
		}
	}
	if j := jain([]float64{1, 1}, []float64{1, 1}); j != 1 {
		t.Fatalf("jain %g", j)
	}
}
