// Package fleet starts what the benchmarks measure: the simulated GPUs
// (one gpusim --fleet process, every GPU on its own port), the setups in
// front of them (Envoy alone with a load-balancing policy, or Envoy asking
// llm-router replicas with a strategy) and a sampler of the GPUs' load.
// The comparisons, the herd race and the sequential and sweep runs start
// their fleets and setups here.
package fleet
