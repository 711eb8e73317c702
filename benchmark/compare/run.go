package compare

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/config"
)

// runner runs setups one after the other against one fleet.
type runner struct {
	env      fleet.Env
	fleet    *fleet.Proc
	gpus     []fleet.GPU
	scale    float64
	slo      stats.SLO
	progress io.Writer
	sample   time.Duration
	grace    time.Duration
	// workers lists the fleet for a router setup (caps differ by setup),
	// mutate adjusts the router's config.
	workers func(fleet.Setup) []config.Worker
	mutate  func(fleet.Setup, *config.Config)
	// redisAddr is the shared store of setups with several replicas.
	redisAddr string
	// blockTokens is the tokens behind a prefix block id (Job.Request).
	blockTokens int
	// runs counts the runs started, for each run's prompt nonce.
	runs int
	// hostRef is the host-speed probe's time before the first run (0: no
	// probe); repeats is how many more runs on a slow host may be repeated.
	hostRef time.Duration
	repeats int
}

// run starts s on an idle fleet, sends jobs open-loop, measures jobs
// [from, to) and stops s.
func (r *runner) run(ctx context.Context, s fleet.Setup, jobs []loadgen.Job, from, to int, label string, firstTokenOnly bool) (*report.Run, error) {
	if err := fleet.WaitIdle(ctx, r.gpus, 10*time.Minute); err != nil {
		return nil, err
	}
	var mut func(*config.Config)
	if r.mutate != nil {
		mut = func(c *config.Config) { r.mutate(s, c) }
	}
	rs, err := r.env.Start(ctx, s, r.workers(s), fleet.RouterOptions{Mutate: mut, Replicas: s.Replicas, RedisAddr: r.redisAddr})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	defer rs.Stop()
	client := loadgen.NewClient(rs.URL, 4096, "")
	defer client.Close()

	pids := map[string]int{"gpusim fleet": r.fleet.Pid()}
	for k, v := range rs.PIDs {
		pids[k] = v
	}
	meter := host.NewCPUMeter(pids)
	machine := host.NewMachineMeter()
	smp := fleet.StartSampler(ctx, r.gpus, r.sample, r.scale)
	probe := host.StartProbe()
	meter.Start()
	machine.Start()
	q0, h0, err := fleet.PrefixCounters(ctx, r.gpus)
	if err != nil {
		return nil, err
	}
	r.runs++
	nonce := fmt.Sprintf("[run %d-%x]", r.runs, time.Now().UnixNano()&0xffffff)
	build := func(j loadgen.Job) loadgen.Request { return j.Request(nonce, r.blockTokens) }
	start := time.Now()
	prog := loadgen.NewProgress(r.progress, label, len(jobs))
	results, lag := loadgen.RunOpen(ctx, client, jobs, loadgen.OpenOptions{Scale: r.scale, From: from, To: to, Grace: r.grace, FirstTokenOnly: firstTokenOnly, Request: build}, prog)
	prog.Finish()
	wall := time.Since(start)
	cpu, cores := meter.Stop()
	busy := machine.Stop()
	probed := probe.Stop()
	inflight := smp.Stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	gpuTime := loadgen.ScaleResults(results, r.scale)
	q1, h1, err := fleet.PrefixCounters(ctx, r.gpus)
	if err != nil {
		return nil, err
	}
	run := &report.Run{
		Summary:      stats.Summarize(gpuTime[from:to], r.slo),
		CPU:          cpu,
		Cores:        cores,
		MachineCores: busy * float64(runtime.NumCPU()),
		MachineCPUs:  runtime.NumCPU(),
		Saturated:    busy > report.SaturationShare,
		SenderLagMs:  stats.Ms(lag),
		WallSeconds:  wall.Seconds(),
		Inflight:     inflight,
		Results:      gpuTime,
	}
	if r.hostRef > 0 && probed > 0 {
		run.HostSlowdown = float64(probed) / float64(r.hostRef)
	}
	if q1 > q0 {
		run.HitRate = float64(h1-h0) / float64(q1-q0)
	}
	run.Summary.Setup = s.Name
	return run, nil
}

// runSteady is run, repeated while the host-speed probe says the host was
// slow (steady).
func (r *runner) runSteady(ctx context.Context, s fleet.Setup, jobs []loadgen.Job, from, to int, label string, log io.Writer) (*report.Run, error) {
	return steady(func() (*report.Run, error) { return r.run(ctx, s, jobs, from, to, label, false) }, &r.repeats, label, log)
}

// steady calls attempt, again while the run it returns was on a slow host,
// at most host.Retries more times and while *budget lasts (each repeat
// spends one, so a host slow for long cannot stretch make bench past its
// time limit); it keeps the attempt on the fastest host
// and lists every attempt's slowdown. The choice reads only the probe,
// never the run's latencies, so it cannot favour a configuration.
func steady(attempt func() (*report.Run, error), budget *int, label string, log io.Writer) (*report.Run, error) {
	var best *report.Run
	var tried []float64
	for n := 0; ; n++ {
		run, err := attempt()
		if err != nil {
			return nil, err
		}
		tried = append(tried, run.HostSlowdown)
		if best == nil || run.HostSlowdown < best.HostSlowdown {
			best = run
		}
		if !run.HostSlow() || n == host.Retries || *budget <= 0 {
			break
		}
		*budget--
		logf(log, "%-48s host %.2fx slower than before the first run: repeating", label, run.HostSlowdown)
	}
	if len(tried) > 1 {
		best.HostAttempts = tried
	}
	return best, nil
}
