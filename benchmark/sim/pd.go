package sim

import (
	"errors"
	"fmt"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/scheduler"
)

// Disagg is a run's prefill/decode split. The first Prefill GPUs of the
// fleet take the prefill role and the others decode; the router pairs a
// decode GPU with a prefill GPU for a request whose prompt, past the
// decode GPU's prefix match, reaches MinUncached tokens (its decider),
// and serves the others on the decode GPU alone. A paired request runs as
// llm-d's sidecar runs it: its prompt on the prefill GPU with one output
// token, then the whole request on the decode GPU, which loads the
// prompt's KV over its link (gpusim's KV connector) instead of computing
// it. The sidecar's own time is not modelled.
type Disagg struct {
	// Prefill is how many GPUs have the prefill role; 0 is an aggregated
	// fleet, every GPU serving whole requests.
	Prefill int `json:"prefill"`
	// MinUncached is the decider's threshold in prompt tokens.
	MinUncached int `json:"min_uncached"`
	// LinkGbps is every GPU's KV link (gpusim's kv_link_gbps).
	LinkGbps float64 `json:"link_gbps"`
}

// On reports whether the run is disaggregated.
func (d Disagg) On() bool { return d.Prefill > 0 }

// validate checks d against a fleet of total GPUs.
func (d Disagg) validate(total int) error {
	var errs []error
	if d.Prefill < 0 || (d.Prefill > 0 && d.Prefill >= total) {
		errs = append(errs, fmt.Errorf("disagg.prefill: %d of %d GPUs: leave at least one to decode", d.Prefill, total))
	}
	if d.MinUncached < 0 {
		errs = append(errs, fmt.Errorf("disagg.min_uncached: must be >= 0, got %d", d.MinUncached))
	}
	if d.On() && !(d.LinkGbps > 0) {
		errs = append(errs, fmt.Errorf("disagg.link_gbps: must be > 0, got %g", d.LinkGbps))
	}
	return errors.Join(errs...)
}

// pdState is a run's requests in their prefill leg.
type pdState struct {
	// prefillGPU is, per request, the GPU running its prefill leg, -1
	// when none runs (aggregated, or the leg is over).
	prefillGPU []int
	// pairedWith reads the prefill worker a ticket was paired with.
	pairedWith func(*scheduler.Ticket) string
}

// startPrefill sends request i, paired by its ticket with a prefill GPU,
// to that GPU with one output token, and returns true; it returns false
// for a request the router serves aggregated, or when the run is not
// disaggregated. decode is the GPU that will decode it.
func (r *runner) startPrefill(i int, t *scheduler.Ticket, decode int) (bool, error) {
	res := &r.res[i]
	res.Prefill = -1
	q := r.reqs[i]
	// The decode GPU's cache, as the engine holds it when the router
	// decides: the check that a mostly cached prompt stays aggregated.
	res.DecodeCached = r.gpus[decode].st.Cached(q.Prompt, q.Blocks)
	worker := r.pd.pairedWith(t)
	if worker == "" {
		return false, nil
	}
	p, ok := r.byID[worker]
	if !ok {
		return false, fmt.Errorf("request %d: paired with unknown prefill worker %q", i, worker)
	}
	res.Prefill = p
	r.pd.prefillGPU[i] = p
	err := r.gpus[p].st.SubmitModel(i, q.model(), gpusim.SimRequest{PromptTokens: q.Prompt, OutputTokens: 1, Blocks: q.Blocks}, r.now)
	if err != nil {
		return false, fmt.Errorf("request %d: prefill on %s: %w", i, worker, err)
	}
	r.wake(p)
	return true, nil
}

// prefillDone handles progress p of GPU g if it is the end of a prefill
// leg, and reports whether it was: the request goes to its decode GPU,
// its KV to be loaded over the link, and the router hears that the
// prefill is over (Ticket.PrefillOver), as at the decode response's
// headers, which the sidecar sends for only after the prefill answered.
func (r *runner) prefillDone(g int, p gpusim.Progress) (bool, error) {
	i := p.Tag
	if r.pd.prefillGPU == nil || r.pd.prefillGPU[i] != g {
		return false, nil
	}
	if !p.Done {
		return true, nil // the prefill's token, which the client never sees
	}
	r.pd.prefillGPU[i] = -1
	r.tickets[i].PrefillOver(false)
	q := r.reqs[i]
	d := r.res[i].GPU
	err := r.gpus[d].st.SubmitModel(i, q.model(), gpusim.SimRequest{
		PromptTokens: q.Prompt, OutputTokens: q.Output, Blocks: q.Blocks, RemotePrefill: true,
	}, r.now)
	if err != nil {
		return true, fmt.Errorf("request %d: decode after prefill: %w", i, err)
	}
	r.wake(d)
	return true, nil
}
