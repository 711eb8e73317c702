package extproc

import (
	"errors"
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestPriorityNeverAboveTheKey(t *testing.T) {
	std := Identity{Tenant: "t", MaxPriority: state.PriorityStandard}
	crit := Identity{Tenant: "t", MaxPriority: state.PriorityCritical}
	batch := Identity{Tenant: "t", MaxPriority: state.PriorityBatch}
	tests := []struct {
		header string
		id     Identity
		want   state.Priority
	}{
		{"", std, state.PriorityStandard},
		{"critical", std, state.PriorityStandard}, // asks more than the key allows
		{"critical", crit, state.PriorityCritical},
		{"batch", crit, state.PriorityBatch}, // lowering is always allowed
		{"", batch, state.PriorityBatch},
		{"STANDARD", batch, state.PriorityBatch},
		{"critical", Anonymous, state.PriorityStandard}, // no key: a header buys nothing
	}
	for _, tc := range tests {
		got, err := priorityOf(tc.header, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("priorityOf(%q, %s) = %q, %v; want %q", tc.header, tc.id.MaxPriority, got, err, tc.want)
		}
	}
	if _, err := priorityOf("urgent", crit); !errors.Is(err, ErrBadPriority) {
		t.Fatalf("bad priority accepted: %v", err)
	}
}
