package scoring

// scored is the default strategy: the live terms (active, and prefix and
// token_load through the candidate's Affinity) plus every registered
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
		c.Affinity = s.affinity(*w)
		out = append(out, c)
	}
	return out
}

// affinity is the candidate's live part: prefix and token-load weights,
// its capacity and, with an SLO and a known prefill rate, the prefill
// load at which its match yields.
func (s scored) affinity(w Worker) Affinity {
	wt := s.p.Weights
	if wt.Prefix == 0 && wt.TokenLoad == 0 {
		return Affinity{}
	}
	a := Affinity{Prefix: wt.Prefix, KVBlocks: w.KVBlocks, Trust: w.PrefixTrust}
	if wt.TokenLoad != 0 && w.KVBlocks > 0 {
		a.TokenWeight, a.CapacityTokens = wt.TokenLoad, float64(w.KVBlocks*BlockTokens)
	}
	if wt.Prefix != 0 && s.p.TTFTSLO > 0 && w.PrefillRate > 0 {
		a.PrefillLimit = s.p.TTFTSLO.Seconds() * w.PrefillRate
	}
	return a
}
