package scoring

// Disaggregate is the decider of prefill/decode disaggregation, llm-d's
// prefix-based-pd-decider: the request's prefill runs on a prefill worker
// when the prompt tokens the decode worker's prefix cache does not hold,
// uncached (Prompt.Uncached of its match), reach minUncached; otherwise
// the decode worker prefills them itself, since a short prefill costs
// less than moving its KV cache. A fully cached prompt is never
// disaggregated, whatever minUncached (0 and 1 mean "anything uncached").
// The stores evaluate it inside the paired claim (state.PairClaimer), on
// the match they read there.
func Disaggregate(uncached, minUncached int) bool {
	return uncached > 0 && uncached >= minUncached
}
