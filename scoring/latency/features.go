package latency

// Features is what the router knows when it considers placing one request
// on one worker: the worker's load before the request, as the claim reads
// it (all router replicas), and the request itself. Negative counts read as
// 0.
type Features struct {
	// Running is the worker's requests in flight.
	Running int
	// PrefillTokens is the prefill ahead of this request on the worker:
	// the uncached prompt tokens of its in-flight requests that have not
	// had their first token. Counted until requests end instead, it
	// mostly measures decoding requests, and TTFT predictions are several
	// times worse (TestPrefillAheadEndsAtFirstToken).
	PrefillTokens int
	// DecodeTokens is the output tokens in flight on the worker (each
	// in-flight request's max_tokens, or the default).
	DecodeTokens int
	// Uncached is this request's prompt tokens the worker has not cached
	// (prompt tokens less the prefix match).
	Uncached int
	// Output is the tokens this request may generate (max_tokens, or the
	// default).
	Output int
}

// Dimensions of the two regressions.
const (
	ttftN = 5 // 1, prefill ahead, own prefill, sequences, prefill × sequences
	tpotN = 3 // 1, sequences, tokens in flight
	maxN  = 5
)

// kilo puts token counts in thousands, so coefficients read as seconds per
// thousand tokens and the normal equations stay well scaled.
const kilo = 1e-3

func nonneg(n int) float64 { return float64(max(n, 0)) }

// ttftX is the TTFT regressor: [1, Q, U, R, (Q + U)·R], where Q is the
// prefill ahead and U the request's own uncached prompt (thousands of
// tokens), and R the requests in flight sharing the steps.
//
// Q and U have coefficients of their own: the router counts a request's
// prompt as ahead in full until its first token, while the engine has
// already computed part of it (the request at the head of the queue is
// mid-prefill), so a token counted ahead costs less than one of the
// request's own, by an amount the router cannot see.
//
// (Q + U)·R is there because every running sequence takes a token of each
// step's budget and adds its host work and KV reads, so the time per
// prefill token grows with R. The decode load is counted in sequences,
// not in output tokens: a sequence costs a step the same whatever its
// max_tokens, which clients often send as a bound far above what they
// get, or not at all.
func ttftX(f Features) [maxN]float64 {
	q, u := nonneg(f.PrefillTokens)*kilo, nonneg(f.Uncached)*kilo
	r := nonneg(f.Running)
	return [maxN]float64{1, q, u, r, (q + u) * r}
}

// tpotX is the TPOT regressor of a worker carrying the load f describes,
// the request included: [1, R, T], R the sequences and T the tokens in
// flight (prompt and output, thousands: the KV each step reads).
func tpotX(f Features) [maxN]float64 {
	r := nonneg(f.Running) + 1
	t := (nonneg(f.PrefillTokens) + nonneg(f.DecodeTokens) + nonneg(f.Uncached) + nonneg(f.Output)) * kilo
	return [maxN]float64{1, r, t}
}

// tpotXWithout is tpotX of the worker's load without the request: what its
// running requests see if it goes elsewhere.
func tpotXWithout(f Features) [maxN]float64 {
	r := nonneg(f.Running)
	t := (nonneg(f.PrefillTokens) + nonneg(f.DecodeTokens)) * kilo
	return [maxN]float64{1, r, t}
}

// typical are feature magnitudes of a busy worker, by regressor: the
// prior's pseudo-observations weigh each coefficient as if its feature
// took this value (see Prior).
var (
	ttftTypical = [maxN]float64{1, 3, 1, 32, 128}
	tpotTypical = [maxN]float64{1, 32, 40}
)
