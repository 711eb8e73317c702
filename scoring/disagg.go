package scoring

// Disaggregate is the decider of prefill/decode disaggregation, llm-d's
// prefix-based-pd-decider: the request's prefill runs on a prefill worker
// when the prompt tokens the decode worker's prefix cache does not hold,
// uncached (Prompt.Uncached of its match), reach minUncached; otherwise
// the decode worker prefills them itself, since a short prefill costs
// less than moving its KV cache. A fully cached prompt is never
// disaggregated, whatever minUncached (0 and 1 mean "anything uncached"),
// and neither is a mostly cached one (under half of its prompt tokens,
// prompt, uncached): the prefill worker would compute only the uncached
// part but send the KV of the whole prompt, so past half cached the
// transfer costs more than the decode worker's own short prefill saves.
// llm-d's decider looks at the uncached count alone; this one adds the
// share. The stores evaluate it inside the paired claim
// (state.PairClaimer), on the match they read there.
func Disaggregate(uncached, prompt, minUncached int) bool {
	return uncached > 0 && uncached >= minUncached && 2*uncached >= prompt
}
