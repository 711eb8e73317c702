package discovery

import (
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestPodRoleReadsLLMDsLabel(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   state.Role
	}{
		{map[string]string{LabelRole: "prefill"}, state.RolePrefill},
		{map[string]string{LabelRole: "decode"}, state.RoleDecode},
		{map[string]string{LabelRole: "both"}, state.RoleBoth},
		{map[string]string{}, state.RoleBoth},
		{map[string]string{LabelRole: "encode"}, state.RoleBoth}, // unknown: takes whole requests
	} {
		if got := podRole(tc.labels); got != tc.want {
			t.Errorf("podRole(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}
