// Package overhead runs llm-bench overhead and serves llm-bench
// noop-extproc: what Envoy with llm-router adds over Envoy straight to one
// instant gpusim and over Envoy with a no-op ext_proc (the floor), at
// fixed rates (Open, the default) or in a closed loop (Closed), with each
// configuration's CPU per request and, as ablations, the router's Envoy
// config with one part taken out. docs/overhead.md explains the figures.
package overhead
