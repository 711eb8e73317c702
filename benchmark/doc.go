// Package benchmark runs the comparisons behind cmd/llm-bench: the
// configurations compared (Envoy alone, the router's strategies, the
// peers' emulations) on one sized fleet, the runs on one workload at
// several loads and seeds, their validity, the reports and plots, and the
// sequential and sweep runs. The fleet and the setups it starts are
// benchmark/fleet's; the load it sends is benchmark/loadgen's; the figures
// it reports are benchmark/stats'; the machine and its CPU and speed
// during a run are benchmark/host's.
package benchmark
