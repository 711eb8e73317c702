package extproc

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// HeaderPrefiller names the prefill worker of a disaggregated request,
// ip:port, for the routing sidecar beside the decode worker the request is
// routed to: llm-d's header (llm-d-routing-sidecar), so that its sidecar
// works unchanged. The sidecar sends the prompt there with max_tokens 1 and
// kv_transfer_params, then decodes locally with the KV cache it gets; with
// no header it passes the request through (aggregated). A client's copy is
// always removed: clients never choose upstreams.
const HeaderPrefiller = "x-prefiller-host-port"

// headerPrefillerURL is the sidecar's older name for HeaderPrefiller,
// still read when HeaderPrefiller is absent: removed from clients' requests
// too.
const headerPrefillerURL = "x-prefiller-url"

// headerPDServed is how the routing sidecar (internal/pdsidecar) says it
// served a request: disaggregated, aggregated, or pdServedFallback when the
// prefill failed and its engine served the request alone. llm-d's sidecar
// sends no such header.
const (
	headerPDServed   = "x-pd-served"
	pdServedFallback = "fallback"
)

// prefillOverClaim is told when a disaggregated request's prefill is over
// (the scheduler's ticket).
type prefillOverClaim interface {
	PrefillOver(failed bool)
}

// prefillOver tells the claim the decode worker's response began, so the
// prefill is over, failed when the sidecar said it fell back.
func (x *exchange) prefillOver(pdServed string) {
	if c, ok := x.claim.(prefillOverClaim); ok {
		c.PrefillOver(pdServed == pdServedFallback)
	}
}

// prefillerClaim is a claim that may name a prefill worker (the
// scheduler's ticket of a disaggregated request).
type prefillerClaim interface {
	Prefill() (worker string, ok bool)
}

// prefiller is the header naming the claim's prefill worker, nil when the
// request runs aggregated (or the worker left the registry since the
// claim: the sidecar then prefills locally, which the header's absence
// asks for).
func (x *exchange) prefiller() *corev3.HeaderValueOption {
	pc, ok := x.claim.(prefillerClaim)
	if !ok || x.srv.opts.AddressOf == nil {
		return nil
	}
	worker, ok := pc.Prefill()
	if !ok {
		return nil
	}
	addr, ok := x.srv.opts.AddressOf(worker)
	if !ok {
		return nil
	}
	return setHeader(HeaderPrefiller, addr)
}

// addPrefiller sets the prefiller header on mut when the request is
// disaggregated. It also drops the header from mut's removals (the
// endpoint-picker mode's held headers reply carries both), so that the
// value set is what the upstream sees whatever order Envoy applies them in.
func (x *exchange) addPrefiller(mut *extprocv3.HeaderMutation) {
	h := x.prefiller()
	if h == nil {
		return
	}
	mut.RemoveHeaders = slices.DeleteFunc(mut.RemoveHeaders, func(k string) bool { return k == HeaderPrefiller })
	mut.SetHeaders = append(mut.SetHeaders, h)
}
