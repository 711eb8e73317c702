// Package compare runs llm-bench compare and agree: the configurations
// compared (Envoy alone, the router's strategies, the peers' emulations)
// on one fleet sized from the workload (SizeFleet), the runs on one
// workload at several loads and seeds, and whether several comparisons
// agree. It fills a benchmark/report Report, which judges the void runs
// and writes the report and plots. It also runs llm-bench sequential and
// sweep, closed loops on the same fleet. The fleet and the setups it
// starts are benchmark/fleet's; the load it sends is benchmark/loadgen's;
// the figures it reports are benchmark/stats'; the machine and its CPU
// and speed during a run are benchmark/host's.
package compare
