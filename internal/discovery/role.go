package discovery

import "github.com/llm-router/llm-router/state"

// LabelRole is llm-d's pod label naming a worker's part in prefill/decode
// disaggregation: prefill, decode or both (docs/disaggregation.md).
const LabelRole = "llm-d.ai/role"

// podRole is the role a pod's labels give it. A missing or unknown value
// is RoleBoth, as llm-d's decode filter reads it: the pod takes whole
// requests, which every engine can serve.
func podRole(labels map[string]string) state.Role {
	r, err := state.ParseRole(labels[LabelRole])
	if err != nil {
		return state.RoleBoth
	}
	return r
}
