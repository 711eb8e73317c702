package extproc

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/llm-router/llm-router/state"
)

// The headers naming a request's fairness id: the tenant whose share of
// its priority band it is served from (state/fair.go). llm-d's name is
// accepted too; ours wins when both are sent.
const (
	headerFairnessID     = "x-llm-fairness-id"
	headerFairnessIDLLMD = "x-llm-d-inference-fairness-id"
)

// ErrBadFairnessID: a fairness id header that is not a tenant name
// (state.ValidTenant).
var ErrBadFairnessID = errors.New("invalid fairness id")

// fairnessHeader is the fairness id a request's headers name, and which
// header named it.
type fairnessHeader struct{ name, value string }

// read takes key's value if it names the fairness id.
func (f *fairnessHeader) read(key, value string) bool {
	switch key {
	case headerFairnessID:
		*f = fairnessHeader{key, value}
	case headerFairnessIDLLMD:
		if f.name != headerFairnessID {
			*f = fairnessHeader{key, value}
		}
	default:
		return false
	}
	return true
}

// tenantOf resolves a request's tenant: a fairness id the identity allows
// (any when keys are off), else the key's tenant, else state.DefaultTenant.
// An id the key does not allow is ignored (ignored true) and the key's
// tenant stands; a malformed or over-long one is an ErrBadFairnessID
// naming its header. unverified says the tenant was named by a header
// no key vouches for, so that configured weights do not apply to it: a
// header alone never buys a larger share.
func tenantOf(h fairnessHeader, id Identity) (tenant string, ignored, unverified bool, err error) {
	v := strings.TrimSpace(h.value)
	own := id.Tenant
	if id.AnyFairnessID || own == "" {
		own = state.DefaultTenant
	}
	switch {
	case h.name == "":
		return own, false, false, nil
	case !state.ValidTenant(v):
		return "", false, false, &paramError{
			Param: h.name, Kind: ErrBadFairnessID,
			Msg: h.name + " must be 1 to " + strconv.Itoa(state.MaxTenantLen) +
				" letters, digits, '.', '_', '-' or ':', starting with a letter or digit",
		}
	case id.AnyFairnessID:
		return v, false, true, nil
	case slices.Contains(id.FairnessIDs, v):
		return v, false, false, nil
	}
	return own, true, false, nil
}
