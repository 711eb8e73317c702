package scoring

// scored is the default strategy: the live terms (active, and prefix_miss
// and token_load through the candidate's LiveWeights) plus every registered
// snapshot term, each weighted by Params.Weights (see doc.go).
type scored struct {
	p       Params
	terms   []SnapshotTerm // the registered terms when the strategy was built
	weights []float64      // their signed weights, in the same order
}

func newScored(p Params) Strategy {
	s := scored{p: p, terms: Terms()}
	s.weights = make([]float64, len(s.terms))
	for i, t := range s.terms {
		s.weights[i] = t.weight(p.Weights)
	}
	return s
}

func (scored) Name() string { return Scored }

// Plan evaluates every snapshot term for every eligible worker; the store
// adds active from the live count (Slope = Weights.Active).
func (s scored) Plan(in Input, eligible []Worker) []Candidate {
	wt := s.p.Weights
	ti := &TermInput{Job: in.Job, Eligible: eligible, Params: s.p}
	n := len(s.terms)
	funcs := make([]TermFunc, n)
	for i, t := range s.terms {
		funcs[i] = t.Prepare(ti)
	}
	out := make([]Candidate, 0, len(eligible))
	backing := make([]Term, n*len(eligible)) // one allocation for every candidate's terms
	var liveBacking []LiveTerm               // and one for their live terms (at most 2 each)
	if wt.Prefix != 0 || wt.TokenLoad != 0 {
		liveBacking = make([]LiveTerm, 2*len(eligible))
	}
	for j := range eligible {
		w := &eligible[j]
		terms := backing[j*n : (j+1)*n : (j+1)*n]
		base := 0.0
		for i, f := range funcs {
			v := f(w)
			terms[i] = Term{Name: s.terms[i].Name, Weight: s.weights[i], Value: v.Value, Unknown: !v.Known}
			base += terms[i].Contribution()
		}
		c := candidate(*w, Curve{Base: base, Slope: wt.Active}, terms...)
		if liveBacking != nil {
			c.LiveTerms = liveBacking[2*j : 2*j : 2*j+2]
			s.live(&c, *w)
		}
		out = append(out, c)
	}
	return out
}

// live adds the candidate's live terms: prefix_miss (the unmatched
// fraction of the prompt's blocks) and token_load (in-flight and uncached
// tokens relative to its KV capacity), with its index bound, its trust
// and, with an SLO and a known prefill rate, the prefill load at which its
// match yields.
func (s scored) live(c *Candidate, w Worker) {
	wt := s.p.Weights
	if wt.Prefix == 0 && wt.TokenLoad == 0 {
		return
	}
	c.LiveWeights = LiveWeights{KVBlocks: w.KVBlocks, Trust: w.PrefixTrust}
	if wt.Prefix != 0 {
		c.AddLive(LiveTerm{Name: "prefix_miss", Weight: wt.Prefix, Miss: 1})
		if s.p.TTFTSLO > 0 && w.PrefillRate > 0 {
			c.LiveWeights.PrefillLimit = s.p.TTFTSLO.Seconds() * w.PrefillRate
		}
	}
	if wt.TokenLoad != 0 && w.KVBlocks > 0 {
		per := 1 / float64(w.KVBlocks*BlockTokens)
		c.AddLive(LiveTerm{Name: "token_load", Weight: wt.TokenLoad, Prefill: per, Decode: per, Uncached: per})
	}
}
