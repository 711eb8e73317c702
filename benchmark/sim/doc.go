// Package sim is a discrete-event simulator of a whole fleet in virtual
// time: router replicas in front of GPUs, driven by a workload, with no
// wall clock anywhere, so an hour of traffic on 256 GPUs takes seconds
// and the same seed gives the same result.
//
// Every GPU is gpusim's calibrated engine (gpusim.Stepper: profiled step
// times, continuous batching with chunked prefill, paged KV with
// preemption, prefix cache). Every router replica is the product's own
// scheduler.Scheduler with its strategy from scoring's registry (the
// peers' emulations of scoring/emulate included), each with its own
// snapshot refreshed on its own phase, all sharing one state/memory store
// whose clock is the simulator's. Engine telemetry reaches the store as
// scrapes at a fixed period, and is unknown past the staleness bound, as
// in the product. For llm-d's precise emulation every engine also
// publishes its KV cache events, which every replica's index takes
// before each decision (precise.go).
//
// A run may split the fleet into prefill and decode GPUs (pd.go): the
// router's paired claim decides which requests run their prompt on a
// prefill GPU, whose KV the decode GPU then loads over its link;
// llm-bench sim pd (ExecutePD) compares such splits with the aggregated
// fleet.
//
// One event queue orders everything by virtual time; at one instant the
// order is: step ends (tokens emitted, finished requests released), then
// arrivals (each admitted by a replica, round robin, and submitted to its
// GPU), then scrapes and snapshot refreshes, then every GPU with work and
// no step in flight starts its next step.
//
// What the simulator leaves out, and why, is in docs/benchmark.md
// ("Virtual-time fleet simulator").
package sim
