package scoring

import "math"

// The live part of a candidate's score is a form over figures only the
// store reads, inside the atomic claim, next to the in-flight count: the
// prompt's prefix match m (leading blocks of n the worker's index holds),
// the worker's in-flight prefill p and decode d tokens, the prefill still
// ahead of a new request q (the uncached prompt tokens of in-flight
// requests that have not had their first token), and the request's
// uncached prompt u(m) = max(0, prompt_tokens − BlockTokens·m). The store
// adds to the curve
//
//	Miss·(1 − trust·m/n) + Prefill·p + Decode·d + Uncached·u(m)
//	  + Ahead·q + AheadDecode·(q + u(m))·d + Stall·u(m)
//
// where the Miss part is 0 when the prompt has no blocks, and m counts as 0
// when PrefillLimit > 0 and q + u(m) > PrefillLimit (the prefill guard,
// "sticky until saturated"). The last two terms are the latency model's
// time to first token (scoring/latency: the prefill the request waits for,
// and how the decodes sharing each step slow it). A candidate whose live
// score less its Stall part passes a positive Ceiling is not available: a
// strategy bounds what its live form predicts (the time to first token
// against its objective) and keeps the rest of its cost in the curve, or,
// when that cost depends on the match, in Stall (what the request's
// prefill costs the requests already running there, which is not its
// own latency). LiveScore is the one evaluation
// of this form; the memory store calls it and claim.lua computes exactly
// the same.
//
// A live term is a named weight times a unit coefficient vector
// (LiveTerm); a candidate's LiveWeights hold the sum over its terms (see
// Candidate.AddLive), so a new term that reads these figures needs no
// change in the stores.

// BlockTokens is the tokens of one prompt block (scoring/prefix).
const BlockTokens = 16

// LiveWeights is a candidate's live part: the coefficients of the linear
// form, the prefill guard, the trust on the match and the bound of its
// prefix index. The zero value adds nothing.
type LiveWeights struct {
	Miss     float64 // of the unmatched fraction of the prompt's blocks
	Prefill  float64 // of each in-flight prefill token
	Decode   float64 // of each in-flight decode token
	Uncached float64 // of each of the request's uncached prompt tokens
	// Ahead is of each prefill token ahead of the request (Live.Ahead);
	// AheadDecode of each unit of (Live.Ahead + uncached)·Live.Decode.
	Ahead       float64
	AheadDecode float64
	// Stall is of each of the request's uncached prompt tokens, as
	// Uncached, but outside what the Ceiling bounds: a cost the request
	// puts on others, not a part of its own latency.
	Stall float64
	// Ceiling (0: none) is the most the candidate's live score less its
	// Stall part (not its curve) may be: past it the claim skips the
	// candidate as if full.
	Ceiling float64
	// PrefillLimit is the prefill ahead (Live.Ahead) plus the request's
	// uncached prompt past which the match counts 0 (0: never).
	PrefillLimit float64
	// Trust scales the match the Miss part counts: the share of predicted
	// hits the engine confirmed (0..1; 0: unknown, counted 1).
	Trust float64
	// KVBlocks is the worker's KV capacity in blocks, the bound of its
	// prefix index (0: the store's default).
	KVBlocks int
}

// On reports whether the claim must read the live figures.
func (w LiveWeights) On() bool {
	return w.Miss != 0 || w.Prefill != 0 || w.Decode != 0 || w.Uncached != 0 ||
		w.Ahead != 0 || w.AheadDecode != 0 || w.Stall != 0
}

// Over reports whether the live figures l put the candidate past its
// Ceiling: its live score less the Stall part above a positive Ceiling.
func (w LiveWeights) Over(p Prompt, l Live) bool {
	if w.Ceiling <= 0 {
		return false
	}
	_, bounded := liveParts(w, p, l)
	return bounded > w.Ceiling
}

// MatchTrust is the factor on the match the Miss part counts: Trust, or 1
// when it is unset or out of 0..1.
func (w LiveWeights) MatchTrust() float64 {
	if w.Trust <= 0 || w.Trust > 1 {
		return 1
	}
	return w.Trust
}

// Guarded reports whether the prefill guard voids match m, ahead being the
// prefill still ahead on the worker (Live.Ahead): what delays the first
// token. In-flight prompts past their first token no longer count (they
// did until requests ended, which kept a warm worker guarded for as long
// as its decodes ran and sent its prefix's next turns elsewhere).
func (w LiveWeights) Guarded(p Prompt, m, ahead int) bool {
	return w.PrefillLimit > 0 && float64(ahead+p.Uncached(m)) > w.PrefillLimit
}

// LiveScore is what the store adds to a candidate's curve given the live
// figures it read (see the form above). A Live that is Unread has Match 0:
// the score of no match, an upper bound.
func LiveScore(w LiveWeights, p Prompt, l Live) float64 {
	s, _ := liveParts(w, p, l)
	return s
}

// liveParts is LiveScore and the part of it the Ceiling bounds (all but
// Stall·u), evaluated in this order as claim.lua does.
func liveParts(w LiveWeights, p Prompt, l Live) (score, bounded float64) {
	m := l.Match
	if w.Guarded(p, m, l.Ahead) {
		m = 0
	}
	u := float64(p.Uncached(m))
	s := w.Prefill*float64(l.Prefill) + w.Decode*float64(l.Decode) + w.Uncached*u +
		w.Ahead*float64(l.Ahead) + w.AheadDecode*(float64(l.Ahead)+u)*float64(l.Decode)
	if n := len(p.Blocks); n > 0 {
		s += w.Miss * (1 - w.MatchTrust()*float64(m)/float64(n))
	}
	return s + w.Stall*u, s
}

// LiveBounds are the least and the most LiveScore can be for any match up
// to full (the longest the store's index can find), given the candidate's
// in-flight tokens: the score of a full match and of none. Both parts that
// depend on the match fall as it grows, and the guard, which voids a
// match, holds for every shorter one when it holds for a longer one. A
// claim looks up the match of only those candidates whose curve plus lo is
// not above the lowest curve plus hi of all: the others can neither win
// nor tie. The bound holds for non-negative coefficients; with a negative
// one, lo and hi are infinite and nothing is skipped.
func LiveBounds(w LiveWeights, p Prompt, full int, l Live) (lo, hi float64) {
	if w.Miss < 0 || w.Prefill < 0 || w.Decode < 0 || w.Uncached < 0 || w.Ahead < 0 || w.AheadDecode < 0 || w.Stall < 0 {
		return math.Inf(-1), math.Inf(1)
	}
	l.Unread = false
	l.Match = full
	lo = LiveScore(w, p, l)
	l.Match = 0
	hi = LiveScore(w, p, l)
	return lo, hi
}

// OverBounds is Over with a full match and with none, the figures of
// LiveBounds: a candidate over with a full match is over with any, and
// one over with none cannot bound the others. With a negative coefficient
// neither holds, as LiveBounds' infinities say: full is never over, and
// none is over whenever there is a Ceiling.
func (w LiveWeights) OverBounds(p Prompt, full int, l Live) (fullOver, noneOver bool) {
	if w.Miss < 0 || w.Prefill < 0 || w.Decode < 0 || w.Uncached < 0 || w.Ahead < 0 || w.AheadDecode < 0 || w.Stall < 0 {
		return false, w.Ceiling > 0
	}
	l.Unread = false
	l.Match = full
	fullOver = w.Over(p, l)
	l.Match = 0
	return fullOver, w.Over(p, l)
}

// LiveTerm is one named live term: Weight times a unit coefficient
// vector. Its contribution to a candidate's score is Weight·Value, Value
// being LiveScore of the unit vector under the candidate's guard and
// trust; the contributions of a candidate's terms sum to LiveScore of its
// LiveWeights.
type LiveTerm struct {
	Name                            string
	Weight                          float64
	Miss, Prefill, Decode, Uncached float64
	Ahead, AheadDecode, Stall       float64
}

// Term evaluates t for the decision log, under w's guard and trust.
func (t LiveTerm) Term(w LiveWeights, p Prompt, l Live) Term {
	unit := LiveWeights{
		Miss: t.Miss, Prefill: t.Prefill, Decode: t.Decode, Uncached: t.Uncached,
		Ahead: t.Ahead, AheadDecode: t.AheadDecode, Stall: t.Stall, PrefillLimit: w.PrefillLimit, Trust: w.Trust,
	}
	return Term{Name: t.Name, Weight: t.Weight, Value: LiveScore(unit, p, l)}
}

// AddLive adds t to the candidate's live terms and its coefficients to
// LiveWeights.
func (c *Candidate) AddLive(t LiveTerm) {
	c.LiveTerms = append(c.LiveTerms, t)
	c.LiveWeights.Miss += t.Weight * t.Miss
	c.LiveWeights.Prefill += t.Weight * t.Prefill
	c.LiveWeights.Decode += t.Weight * t.Decode
	c.LiveWeights.Uncached += t.Weight * t.Uncached
	c.LiveWeights.Ahead += t.Weight * t.Ahead
	c.LiveWeights.AheadDecode += t.Weight * t.AheadDecode
	c.LiveWeights.Stall += t.Weight * t.Stall
}

// Prompt is what a claim tells the store about the request's prompt: the
// figures the live score and the token holds read. The zero value asks
// for no live reads.
type Prompt struct {
	// Blocks are the prompt's chained block hashes (scoring/prefix); the
	// store matches them against each candidate's index and records them
	// for the winner. Nil: no prefix lookup and nothing recorded.
	Blocks []uint64
	// PromptTokens is the prompt's token estimate; the uncached part
	// counts as in-flight prefill on the winner until the claim ends.
	PromptTokens int
	// DecodeTokens is the expected output (max_tokens, or a default),
	// counted as in-flight decode on the winner until the claim ends.
	DecodeTokens int
}

// Uncached is the prompt tokens not covered by match leading blocks.
func (p Prompt) Uncached(match int) int { return max(0, p.PromptTokens-BlockTokens*match) }

// Need is the tokens a claim with match leading blocks held holds on its
// worker (uncached prompt and decode), as a token limit counts them.
func (p Prompt) Need(match int) int { return p.Uncached(match) + max(0, p.DecodeTokens) }

// PredictedHits is the prompt tokens a match of match leading blocks
// predicts the engine finds cached: the blocks' tokens, but never the
// prompt's last token, which engines always compute.
func (p Prompt) PredictedHits(match int) int64 {
	return int64(max(0, min(BlockTokens*match, p.PromptTokens-1)))
}

// Live are the figures the claim read for one candidate besides its
// in-flight count.
type Live struct {
	Match   int // leading prompt blocks the worker's index holds
	Prefill int // in-flight prefill tokens, all replicas
	Decode  int // in-flight decode tokens, all replicas
	// Ahead is the in-flight prefill tokens of requests that have not had
	// their first token (all replicas): the prefill a new request waits
	// behind. Prefill counts the same tokens until their requests end.
	Ahead int
	// Unread: the store did not look the match up, since even a full
	// match could not have made this candidate win (LiveBounds); Match
	// is then 0 and the score that of no match: an upper bound.
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

// Prompt is the job's prompt figures for the claim.
func (j Job) Prompt() Prompt {
	return Prompt{Blocks: j.Blocks, PromptTokens: j.PromptTokens, DecodeTokens: j.DecodeTokens()}
}

// appendLiveTerms appends a candidate's live terms for the decision log
// to terms: each of its LiveTerms, and beside them, weight 0, the raw
// prefix_match (or prefix_unread when the store did not look it up),
// prefix_trust when below 1 and prefill_guard when the guard voided the
// match. The contributions sum to LiveScore(c.LiveWeights, …).
func appendLiveTerms(terms []Term, c Candidate, p Prompt, l Live) []Term {
	w := c.LiveWeights
	n := len(p.Blocks)
	if n > 0 {
		if l.Unread {
			terms = append(terms, Term{Name: "prefix_unread", Value: 1})
		} else {
			terms = append(terms, Term{Name: "prefix_match", Value: float64(l.Match) / float64(n)})
		}
	}
	for _, t := range c.LiveTerms {
		terms = append(terms, t.Term(w, p, l))
	}
	if tr := w.MatchTrust(); n > 0 && tr < 1 {
		terms = append(terms, Term{Name: "prefix_trust", Value: tr})
	}
	if w.Guarded(p, l.Match, l.Ahead) {
		terms = append(terms, Term{Name: "prefill_guard", Value: 1})
	}
	return terms
}
