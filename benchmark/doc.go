// Package benchmark holds llm-router's benchmarks, one package per
// llm-bench command, and what they share:
//
//   - benchmark/compare: the comparisons (llm-bench compare and agree) of
//     Envoy alone, the router's strategies and the peers' emulations on
//     one sized fleet, at several loads and seeds; and the sequential and
//     sweep runs;
//   - benchmark/report: a comparison's record (Report), the rules that
//     make its runs void, and the JSON, CSVs, Markdown report and plots
//     written from it;
//   - benchmark/herd: the herd race (llm-bench herd);
//   - benchmark/overhead: what the router adds to a request (llm-bench
//     overhead and noop-extproc);
//   - benchmark/picks: decisions per second and script cost against Redis
//     (llm-bench picks and script-cost);
//   - benchmark/fleet: the simulated GPUs and the setups started in front
//     of them; benchmark/loadgen: the load sent; benchmark/stats: the
//     figures and their intervals; benchmark/host: the machine and its CPU
//     and speed during a run; benchmark/record: the run folders;
//     benchmark/gpusim: the simulated GPU server.
//
// This package itself holds no code.
package benchmark
