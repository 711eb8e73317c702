package scoring

// Affinity is the part of a candidate's score that the store computes from
// live figures read inside the atomic claim, next to the in-flight count:
// the prompt's prefix match on the worker's index and the worker's
// in-flight tokens. The store adds to the curve
//
//	Prefix·(1 − trust·match/blocks) + TokenWeight·(prefill + decode + uncached)/CapacityTokens
//
// (trust: Trust, the share of predicted hits the engine confirmed)
// where uncached = max(0, prompt_tokens − BlockTokens·match) and a worker
// whose prefill + uncached exceeds PrefillLimit (> 0) counts as matching
// nothing ("sticky until saturated"). The zero value adds nothing.
type Affinity struct {
	Prefix         float64 // weight of the unmatched fraction of the prompt's blocks
	TokenWeight    float64 // weight of in-flight tokens relative to capacity
	CapacityTokens float64 // the worker's KV capacity in tokens (> 0 when TokenWeight is set)
	PrefillLimit   float64 // in-flight prefill tokens past which the match yields (0: never)
	KVBlocks       int     // the worker's KV capacity in blocks, the bound of its prefix index
	// Trust scales the match the prefix term counts: the share of
	// predicted hits the engine confirmed (0..1; 0: unknown, counted 1).
	Trust float64
}

// MatchTrust is the factor on the match the prefix term counts.
func (a Affinity) MatchTrust() float64 {
	if a.Trust <= 0 || a.Trust > 1 {
		return 1
	}
	return a.Trust
}

// TokenLoad is the weight of one in-flight token.
func (a Affinity) TokenLoad() float64 {
	if a.TokenWeight == 0 || a.CapacityTokens <= 0 {
		return 0
	}
	return a.TokenWeight / a.CapacityTokens
}

// On reports whether the claim must read live match and token figures.
func (a Affinity) On() bool { return a.Prefix != 0 || a.TokenWeight != 0 }

// BlockTokens is the tokens of one prompt block (scoring/prefix).
const BlockTokens = 16

// Live are the figures the claim read for one candidate besides its
// in-flight count.
type Live struct {
	Match   int // leading prompt blocks the worker's index holds
	Prefill int // in-flight prefill tokens, all replicas
	Decode  int // in-flight decode tokens, all replicas
	// Unread: the store did not look the match up, since even a full
	// match could not have made this candidate win (state.AffinityBounds).
	// Its terms are then those of no match: an upper bound of its score.
	Unread bool
}

// DecodeTokens is the output a claim holds as in-flight decode: max_tokens,
// or DefaultOutputTokens when the client sent none.
func (j Job) DecodeTokens() int {
	if j.MaxTokens > 0 {
		return j.MaxTokens
	}
	return DefaultOutputTokens
}

// Uncached is the prompt tokens not covered by match leading blocks.
func (j Job) Uncached(match int) int { return max(0, j.PromptTokens-BlockTokens*match) }

// affinityTerms are the live terms of a candidate: prefix_miss (after the
// load guard), token_load, and the raw prefix_match for the record
// (weight 0). They sum to what the store added to the curve, or, for a
// candidate whose match the store did not look up (prefix_unread, in
// place of prefix_match), to what it would add with no match: more than
// the winner's score.
func affinityTerms(a Affinity, job Job, l Live) []Term {
	match := l.Match
	guarded := a.PrefillLimit > 0 && float64(l.Prefill+job.Uncached(match)) > a.PrefillLimit
	if guarded {
		match = 0
	}
	n := len(job.Blocks)
	terms := make([]Term, 0, 4)
	if n > 0 {
		if l.Unread {
			terms = append(terms, Term{Name: "prefix_unread", Value: 1})
		} else {
			terms = append(terms, Term{Name: "prefix_match", Value: float64(l.Match) / float64(n)})
		}
		terms = append(terms, Term{Name: "prefix_miss", Weight: a.Prefix, Value: 1 - a.MatchTrust()*float64(match)/float64(n)})
		if tr := a.MatchTrust(); tr < 1 {
			terms = append(terms, Term{Name: "prefix_trust", Value: tr})
		}
	}
	if guarded {
		terms = append(terms, Term{Name: "prefill_guard", Value: 1})
	}
	if a.CapacityTokens > 0 {
		tok := float64(l.Prefill + l.Decode + job.Uncached(match))
		terms = append(terms, Term{Name: "token_load", Weight: a.TokenWeight, Value: tok / a.CapacityTokens})
	}
	return terms
}

// AffinityScore is what the store adds to c's curve given the live
// figures (see Affinity); the stores compute exactly this.
func AffinityScore(c Candidate, job Job, l Live) float64 {
	s := 0.0
	for _, t := range affinityTerms(c.Affinity, job, l) {
		s += t.Contribution()
	}
	return s
}
