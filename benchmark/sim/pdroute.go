package sim

import (
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// The router's side of disaggregation as a run uses it: the prefill role
// of a worker, the prefill worker a ticket was paired with, and the
// release of the prefill claim once the prefill has run.

// setPrefillRole gives spec the prefill role.
func setPrefillRole(spec *state.WorkerSpec) {}

// prefillWorker is the prefill worker t's request was paired with, or ""
// when it runs aggregated.
func prefillWorker(t *scheduler.Ticket) string { return "" }

// releasePrefill releases t's prefill claim.
func releasePrefill(t *scheduler.Ticket) {}
