package extproc

import (
	"strings"
	"time"

	"github.com/llm-router/llm-router/state"
)

// Identity is who sent a request, as its API key says, the highest
// priority that key may use and the tightest latency objectives it may ask
// for (0: the router's bound, SLOPolicy.MinTTFT and MinTPOT).
type Identity struct {
	Tenant           string
	MaxPriority      state.Priority
	MinTTFT, MinTPOT time.Duration
	// FairnessIDs are the fairness ids the key's requests may name as
	// their tenant (x-llm-fairness-id); AnyFairnessID lets them name any
	// (keys off), with weight 1.
	FairnessIDs   []string
	AnyFairnessID bool
}

// Anonymous is the identity of requests when API keys are off: they may
// lower their priority but never raise it above standard, and their
// latency objectives are bounded by the router's, so a header alone never
// buys priority or the tightest objectives. They may name any fairness id,
// served with weight 1.
var Anonymous = Identity{Tenant: "anonymous", MaxPriority: state.PriorityStandard, AnyFairnessID: true}

// Authenticator checks a request's Authorization header and returns the
// identity of its key; a missing or unknown key is ErrUnauthenticated
// (errors.Is). internal/auth implements it.
type Authenticator interface {
	Authenticate(authorization string) (Identity, error)
}

// priorityOf resolves the priority of a request: the x-llm-priority header
// (empty: standard) lowered to the identity's maximum. A request may lower
// its own priority freely and raise it only as far as its key allows.
func priorityOf(header string, id Identity) (state.Priority, error) {
	want := state.Priority(strings.ToLower(strings.TrimSpace(header))).OrStandard()
	if !want.Valid() {
		return "", ErrBadPriority
	}
	if limit := id.MaxPriority.OrStandard(); want.Rank() < limit.Rank() {
		return limit, nil
	}
	return want, nil
}
