package sim

import (
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// The router's side of disaggregation as a run uses it: a prefill GPU's
// role, and the prefill worker a ticket was paired with. The router's
// paired claim decides (scheduler, "Prefill/decode disaggregation"), and
// pd.go tells the ticket when the prefill is over (Ticket.PrefillOver).

// setPrefillRole gives spec the prefill role.
func setPrefillRole(spec *state.WorkerSpec) { spec.Role = state.RolePrefill }

// prefillWorker is the prefill worker t's request was paired with, or ""
// when it runs aggregated.
func prefillWorker(t *scheduler.Ticket) string {
	w, _ := t.Prefill()
	return w
}
