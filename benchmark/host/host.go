// Package host measures the machine the benchmark runs on: what it is
// (Machine), the CPU of its processes and of the whole machine over a run,
// and a probe of the host's own speed, so that a run the machine slowed
// down can be told from a slow configuration.
package host

import (
	"crypto/sha256"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Probe is the host-speed probe: how fast the host does a fixed piece of work
// while a run goes on, against how fast it did it before the first run.
//
// Why: at a time scale of 0.15, every millisecond the proxies and clients
// spend is 6.7 ms of GPU time, so the same configuration measured on the
// same workload moves when the shared host slows down under it (another
// tenant on the physical cores, a lower clock). Two consecutive make bench
// runs once differed by a configuration's p90 TTFT (970 against 746 ms)
// while its processes used a quarter more CPU for the same requests. The
// probe tells such a run from a slow configuration: it times work that
// does not depend on the configuration.
//
// What it measures: every ProbePeriod, one locked OS thread hashes a fixed
// buffer probeRounds times and records the wall time. Our own processes
// compete for the cores too, and a probe that waited for one would read
// slow; the 10th percentile keeps the probes that found a core free, so
// it reads the speed of the core itself. With nothing else on the machine
// it moved by under 3 % across a minute of runs here, busy or idle.
type Probe struct {
	stopCh chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex
	times  []time.Duration
}

const (
	ProbePeriod = 20 * time.Millisecond
	probeRounds = 64 // about 130 µs on a 2-core Xeon or EPYC VM
	// probeQuantile is the share of probes whose time is reported.
	probeQuantile = 0.10
)

// probeWork is the fixed work; its result feeds the next round so the
// compiler cannot drop it.
func probeWork(buf []byte) time.Duration {
	start := time.Now()
	for range probeRounds {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	return time.Since(start)
}

// StartProbe starts probing every ProbePeriod until Stop.
func StartProbe() *Probe {
	p := &Probe{stopCh: make(chan struct{})}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 4096)
		t := time.NewTicker(ProbePeriod)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				d := probeWork(buf)
				p.mu.Lock()
				p.times = append(p.times, d)
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// Stop ends the probe and returns the 10th percentile of its times (0 when
// it took none).
func (p *Probe) Stop() time.Duration {
	close(p.stopCh)
	p.done.Wait()
	return lowQuantile(p.times)
}

func lowQuantile(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[int(probeQuantile*float64(len(s)-1))]
}

// Calibrate is the probe's time on the machine before any run: the
// reference every run's slowdown is relative to.
func Calibrate(d time.Duration) time.Duration {
	p := StartProbe()
	time.Sleep(d) // the calibration window
	return p.Stop()
}

// Calibration is how long the reference is probed: 100 probes.
const Calibration = 2 * time.Second

// SlowLimit is the slowdown beyond which a run is repeated: 10 %, over
// three times the probe's own spread on a steady host.
const SlowLimit = 1.10

// Retries is how many times a run on a slow host is repeated before
// its best attempt is kept, marked; RepeatBudget bounds the repeats of
// one comparison: 8 runs are about a minute of make bench's 15.
const (
	Retries      = 2
	RepeatBudget = 8
)
