// Package benchmark runs the comparisons behind cmd/llm-bench: the
// simulated fleet and the configurations put in front of it (Envoy alone,
// the router's strategies, the peers' emulations), the runs on one
// workload at several loads and seeds, their validity, the reports and
// plots, and the herd and overhead benchmarks. The load it sends is
// benchmark/loadgen's; the figures it reports are benchmark/stats'; the
// machine's CPU and speed during a run are benchmark/host's.
package benchmark
