package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/stats"
	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/caps"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// uncapped is max_concurrency for a GPU whose class sets none.
const uncapped = 1 << 30

// fleetGPU is one simulated GPU.
type fleetGPU struct {
	id      string
	st      *gpusim.Stepper
	planned bool // a plan event is queued
}

type runner struct {
	run      Run
	now      time.Duration
	q        queue
	gpus     []*fleetGPU
	byID     map[string]int
	store    *memory.Store
	replicas []*scheduler.Scheduler
	reqs     []Request
	res      []Result
	tickets  []*scheduler.Ticket
	left     int // requests not yet resolved
	events   uint64
	tally    decisionTally

	// The queue in virtual time (admit.go).
	slo       scheduler.SLO
	claimed   []time.Duration // when each request's claim was made
	yield     chan yielded
	running   int // the request whose admission runs; -1: none
	admitting []bool
	timers    []*simTimer
	notices   []notice
	waiting   map[string]int // queued claim id → request

	// limits is the learner of limits the product's telemetry monitor
	// runs after each scrape (the model limit under predicted); nil for
	// the other strategies, whose adaptive caps are off by default.
	limits *caps.ModelBox

	// loraFeed carries scrapes to the GIE LoRA emulation; nil otherwise.
	loraFeed *loraFeed

	pd pdState

	misses *missTracker // misses.go
}

// fleetSpecs are the GPUs' engine configs and router specs, in fleet order.
func fleetSpecs(gpus []GPUClass, eng Engine, dis Disagg) ([]gpusim.Config, []state.WorkerSpec, error) {
	var cfgs []gpusim.Config
	var specs []state.WorkerSpec
	for _, g := range gpus {
		prof, err := gpusim.LookupProfile(g.Profile)
		if err != nil {
			return nil, nil, err
		}
		// As llm-bench compare sizes workers: the KV cache in blocks, and
		// one full chunk over the step that computes it.
		chunk := max(eng.MaxBatchedTokens, 1)
		prefill := float64(chunk) / prof.StepTime(chunk, 0, 1).Seconds()
		capacity := g.MaxConcurrency
		if capacity == 0 {
			capacity = uncapped
		}
		for range g.Count {
			id := fmt.Sprintf("%s-%d", prof.GPU, len(cfgs))
			c := gpusim.DefaultConfig()
			c.ID, c.Listen, c.Models, c.Profile = id, id, []string{loadgen.Model}, g.Profile
			c.MaxNumSeqs, c.MaxBatchedTokens, c.GPUMemUtil = eng.MaxNumSeqs, eng.MaxBatchedTokens, eng.GPUMemUtil
			c.StreamSummary = eng.StreamSummary
			c.KVLinkGbps = dis.LinkGbps
			spec := state.WorkerSpec{
				ID: id, Address: id + ":8000", Models: []string{loadgen.Model}, MaxConcurrency: capacity,
				KVBlocks: prof.KVCapacityBlocks(eng.GPUMemUtil), PrefillTokensPerSecond: prefill,
			}
			if len(cfgs) < dis.Prefill {
				setPrefillRole(&spec)
			}
			cfgs = append(cfgs, c)
			specs = append(specs, spec)
		}
	}
	return cfgs, specs, nil
}

// withAdapters gives every engine the adapters of its model as its
// lora_modules and max_loras slots, and every worker spec the same, as
// the router's workers[].adapters and max_loras would say.
func withAdapters(cfgs []gpusim.Config, specs []state.WorkerSpec, eng Engine, adapters []string) {
	if eng.MaxLoras == 0 || len(adapters) == 0 {
		return
	}
	for i := range cfgs {
		cfgs[i].MaxLoras, cfgs[i].LoRALoadMs = eng.MaxLoras, eng.LoRALoadMs
		cfgs[i].LoRAModules = slices.Clone(adapters)
		specs[i].MaxLoras = eng.MaxLoras
		for _, a := range adapters {
			specs[i].Adapters = append(specs[i].Adapters, state.Adapter{Name: a, Base: cfgs[i].Models[0]})
		}
	}
}

// simulate runs reqs (sorted by arrival) through the run's fleet.
func simulate(run Run, reqs []Request) (*RunResult, error) {
	return simulateWith(run, reqs, prefillWorker)
}

// simulateWith is simulate with the prefill worker a ticket was paired
// with read by pairedWith (tests fake the router's pairing).
func simulateWith(run Run, reqs []Request, pairedWith func(*scheduler.Ticket) string) (*RunResult, error) {
	cfgs, specs, err := fleetSpecs(run.GPUs, run.Engine, run.Disagg)
	if err != nil {
		return nil, err
	}
	withAdapters(cfgs, specs, run.Engine, run.Adapters)
	r := &runner{
		run: run, byID: map[string]int{}, reqs: reqs, left: len(reqs),
		yield: make(chan yielded, 1), running: -1, waiting: map[string]int{},
		claimed: make([]time.Duration, len(reqs)), admitting: make([]bool, len(reqs)),
	}
	r.pd.pairedWith = pairedWith
	r.misses = newMissTracker(len(reqs))
	for i, c := range cfgs {
		st, err := gpusim.NewStepper(c)
		if err != nil {
			return nil, fmt.Errorf("gpu %s: %w", c.ID, err)
		}
		r.gpus = append(r.gpus, &fleetGPU{id: c.ID, st: st})
		r.byID[c.ID] = i
	}
	clock := func() time.Time { return epoch.Add(r.now) }
	// Claims live as long as their request: leases guard against a dead
	// replica, which the simulator does not model, so none may lapse.
	r.store = memory.New(clock, state.Limits{Lease: 100_000 * time.Hour})
	if err := r.store.Register(context.Background(), specs); err != nil {
		return nil, err
	}
	if err := r.buildReplicas(clock); err != nil {
		return nil, err
	}
	r.res = make([]Result, len(reqs))
	r.tickets = make([]*scheduler.Ticket, len(reqs))
	if run.Disagg.On() {
		r.pd.prefillGPU = make([]int, len(reqs))
	}
	for i, q := range reqs {
		r.res[i] = Result{Arrival: q.Arrival, Prompt: q.Prompt, GPU: -1, Replica: i % run.Replicas, Prefill: -1}
		if r.pd.prefillGPU != nil {
			r.pd.prefillGPU[i] = -1
		}
		r.q.push(q.Arrival, kindArrival, i)
	}
	period := run.Router.scrapePeriod(run.Strategy)
	for g := range r.gpus {
		r.q.push(period*time.Duration(g)/time.Duration(len(r.gpus)), kindScrape, g)
	}
	every := run.Router.RefreshInterval
	for i := range r.replicas {
		r.q.push(every*time.Duration(i)/time.Duration(len(r.replicas)), kindRefresh, i)
	}
	if err := r.loop(period); err != nil {
		return nil, err
	}

	return r.result(), nil
}

// newReplicas builds the router replicas: the product's scheduler with the
// product's defaults, each with its own strategy instance and random
// source, all on one store and the simulator's clock.
func (r *runner) newReplicas(clock func() time.Time) error {
	cfg := config.Default()
	if r.run.Config != nil {
		cfg = *r.run.Config
	}
	// Every request has the router's default objectives, as a request
	// that names none.
	r.slo = scheduler.SLO{
		TTFT: scheduler.NewObjective(cfg.SLO.TTFT.D(), scheduler.SLODefault),
		TPOT: scheduler.NewObjective(cfg.SLO.TPOT.D(), scheduler.SLODefault),
	}
	if r.run.Strategy == scoring.Predicted {
		obj := caps.Objectives{TTFT: cfg.SLO.TTFT.D(), TPOT: cfg.SLO.TPOT.D()}
		r.limits = caps.NewModelLearner(r.store, func(string) caps.Objectives { return obj }, clock)
	}
	for i := range r.run.Replicas {
		rng := rand.New(rand.NewPCG(r.run.Seed, uint64(i)))
		s, err := scheduler.New(queueStore{Store: r.store, r: r}, scheduler.Options{
			Strategy:               r.run.Strategy,
			Params:                 app.Params(cfg),
			ReplicaID:              "replica-" + strconv.Itoa(i),
			RefreshInterval:        r.run.Router.RefreshInterval,
			EMAAlpha:               cfg.EMAAlpha,
			TelemetryStale:         r.run.Router.TelemetryStale,
			KVBlocks:               cfg.Scoring.KVBlocks,
			MaxAffinityBlocks:      cfg.Scoring.MaxPrefixBlocks,
			PrefillTokensPerSecond: cfg.Scoring.PrefillTokensPerSecond,
			ClaimTokens:            cfg.AdaptiveCaps.Enabled && cfg.AdaptiveCaps.TokenLimits,
			Now:                    clock,
			Shuffle:                rng.Shuffle,
			InlineLearning:         true,
			Recorder:               &r.tally,
			Queue: scheduler.QueueOptions{
				MaxSize:            cfg.Queue.MaxQueueSize,
				CriticalMultiplier: cfg.Queue.CriticalMultiplier,
				BatchShare:         cfg.Queue.BatchShare,
				Timeouts:           cfg.Queue.Timeout.ByRank(),
				// The store's notices are never lost here: no poll.
				PollEvery: maxOverrun,
			},
			// The engines load adapters themselves (lora.manage off, the
			// default); the router prices loads from lora.load_time until
			// it learns each worker's.
			Adapters:       scheduler.AdapterOptions{LoadTime: cfg.LoRA.LoadTime.D(), LoadTimeout: cfg.LoRA.LoadTimeout.D()},
			After:          r.after,
			Parked:         r.parked,
			Disaggregation: scheduler.Disaggregation{MinUncached: r.run.Disagg.MinUncached},
		})
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		if err := s.Subscribe(context.Background()); err != nil {
			return err
		}
		if err := s.Refresh(context.Background()); err != nil {
			return err
		}
		r.replicas = append(r.replicas, s)
	}
	return nil
}

// maxOverrun bounds how long after the last arrival a run may go on: a
// fleet that has not finished by then is stalled (a bug), not slow.
const maxOverrun = 1000 * time.Hour

func (r *runner) loop(period time.Duration) error {
	ctx := context.Background()
	last := time.Duration(0)
	if n := len(r.reqs); n > 0 {
		last = r.reqs[n-1].Arrival
	}
	for r.left > 0 {
		if r.q.len() == 0 {
			return fmt.Errorf("at %v: no event left with %d requests unresolved", r.now, r.left)
		}
		ev := r.q.pop()
		r.now = ev.at
		r.events++
		if r.now > last+maxOverrun {
			return fmt.Errorf("at %v: %d requests still unresolved", r.now, r.left)
		}
		switch ev.kind {
		case kindStepEnd:
			if err := r.stepEnd(ev.i); err != nil {
				return err
			}
		case kindArrival:
			if err := r.arrive(ctx, ev.i); err != nil {
				return err
			}
		case kindTimer:
			if err := r.fire(ev.i); err != nil {
				return err
			}
		case kindScrape:
			if err := r.scrape(ctx, ev.i); err != nil {
				return err
			}
			r.q.push(r.now+period, kindScrape, ev.i)
		case kindRefresh:
			if err := r.replicas[ev.i].Refresh(ctx); err != nil {
				return err
			}
			r.q.push(r.now+r.run.Router.RefreshInterval, kindRefresh, ev.i)
		case kindPlan:
			g := r.gpus[ev.i]
			g.planned = false
			if at, ok := g.st.Plan(r.now); ok {
				r.q.push(at, kindStepEnd, ev.i)
			}
		}
		if err := r.settle(); err != nil {
			return err
		}
	}
	return nil
}

// wake queues a plan for GPU g at the end of this instant, unless one is
// queued or a step is in flight (its end plans the next).
func (r *runner) wake(g int) {
	if gp := r.gpus[g]; !gp.planned && !gp.st.Busy() {
		gp.planned = true
		r.q.push(r.now, kindPlan, g)
	}
}

// stepEnd applies GPU g's step: first tokens are noted, finished requests
// release their claims with what the router would have measured.
func (r *runner) stepEnd(g int) error {
	for _, p := range r.gpus[g].st.Advance(r.now) {
		if leg, err := r.prefillDone(g, p); leg || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		res := &r.res[p.Tag]
		if p.First {
			res.FirstToken, res.Cached = p.At, p.CachedTokens
			// As the router's response phase: the prefill stops counting
			// ahead of others, and the TTFT is learned.
			r.tickets[p.Tag].FirstToken(p.At - r.claimed[p.Tag])
		}
		if !p.Done {
			continue
		}
		res.Done, res.Tokens, res.Outcome = p.At, p.Tokens, OutcomeOK
		res.ITLP99 = stats.Percentile(p.Gaps, 99)
		if r.run.Engine.StreamSummary {
			res.Gaps = p.Gaps
		}
		r.left--
		o := scheduler.Outcome{Status: 200, TTFT: res.FirstToken - r.claimed[p.Tag], CompletionTokens: p.Tokens}
		if p.Tokens > 1 && res.Done > res.FirstToken {
			o.TokensPerSec = float64(p.Tokens-1) / (res.Done - res.FirstToken).Seconds()
		}
		r.tickets[p.Tag].Finish(o)
		r.tickets[p.Tag] = nil
	}
	r.wake(g)
	return nil
}

// scrape writes GPU g's engine metrics to the store, as the replica
// monitoring it would after reading its /metrics.
func (r *runner) scrape(ctx context.Context, g int) error {
	s := r.gpus[g].st.State()
	r.loraFeed.observe(r.gpus[g].id, s.LoRA)
	at := epoch.Add(r.now)
	tm := state.Telemetry{
		KVUsage: state.Sample{Value: s.KVUsage(), At: at},
		Waiting: state.Sample{Value: float64(s.Waiting), At: at},
		Running: state.Sample{Value: float64(s.Running), At: at},
		At:      at,
	}
	if l := s.LoRA; l != nil {
		// vllm:lora_requests_info and /v1/models, as the router's
		// telemetry reads them.
		tm.Adapters = state.AdapterReport{Running: l.Running, Waiting: l.Waiting, MaxLoras: l.MaxLoras, At: at}
		for _, a := range l.Registered {
			tm.Adapters.Listed = append(tm.Adapters.Listed, state.Adapter{Name: a, Base: loadgen.Model})
		}
	}
	if err := r.store.PutTelemetry(ctx, map[string]state.Telemetry{r.gpus[g].id: tm}); err != nil || r.limits == nil {
		return err
	}
	// As the monitor's cycle: the worker's limit from its model.
	snap, err := r.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	return r.limits.Learn(ctx, snap, []string{r.gpus[g].id})
}

func (r *runner) result() *RunResult {
	out := &RunResult{
		Run: r.run, Requests: r.res, Served: make([]int, len(r.gpus)), End: r.now, Events: r.events,
		Decisions: r.tally.decisions, SnapshotAge: r.tally.age, Conflicts: r.tally.conflicts,
		Queued: r.tally.queued, Waited: r.tally.waited, Predictions: r.tally.predictions,
		Misses: r.misses.result(r.res),
	}
	for _, g := range r.gpus {
		s := g.st.State()
		out.PrefixQueries += s.PrefixCacheQueries
		out.PrefixHits += s.PrefixCacheHits
		out.Preemptions += s.Preemptions
		if s.LoRA != nil {
			out.LoRALoads += s.LoRA.Loads
		}
	}
	for _, res := range r.res {
		switch res.Outcome {
		case OutcomeOK:
			out.Served[res.GPU]++
		case OutcomeMissingAdapter:
			out.MissingAdapter++
		}
	}
	return out
}
