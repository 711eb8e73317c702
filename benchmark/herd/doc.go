// Package herd runs llm-bench herd: bursts of simultaneous requests onto
// an idle simulated fleet, counting how often two requests land on one GPU
// while another idles, per strategy, with the atomic claim on and off and
// with one and several router replicas on one shared redis-server. Its
// fleet and setups are benchmark/fleet's.
package herd
