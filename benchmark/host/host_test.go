package host

import (
	"testing"
	"time"
)

func TestLowQuantileKeepsTheFastProbes(t *testing.T) {
	var ts []time.Duration
	for i := range 100 {
		ts = append(ts, time.Duration(100-i)*time.Microsecond) // 100 down to 1
	}
	if got := lowQuantile(ts); got != 10*time.Microsecond {
		t.Fatalf("10th percentile of 1..100 µs = %v, want 10µs", got)
	}
	if ts[0] != 100*time.Microsecond {
		t.Fatal("lowQuantile sorted its input in place")
	}
	if lowQuantile(nil) != 0 {
		t.Fatal("no probes should read 0")
	}
}

func TestHostProbeTimesItsWork(t *testing.T) {
	p := StartProbe()
	// Ten probes taken, polled: on a busy host the ticker runs late.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(ProbePeriod) {
		p.mu.Lock()
		n := len(p.times)
		p.mu.Unlock()
		if n >= 10 || time.Now().After(deadline) {
			break
		}
	}
	got := p.Stop()
	if got <= 0 || got > ProbePeriod {
		t.Fatalf("probe time %v, want within (0, %v]", got, ProbePeriod)
	}
}
