package scoring

// SnapshotTerm declares one term of the scored formula that is computed
// from the worker snapshot, before the claim. Each lives in a file of its
// own (term_<name>.go) with its table test, and registers itself from
// that file's init with RegisterTerm; scored evaluates every registered
// term, and the configuration reads its weight under scoring.weights.<Key>
// with no change of its own.
//
// The live terms (active, prefix, token_load) are not snapshot terms: the
// store evaluates them inside the atomic claim (see Curve and LiveWeights).
type SnapshotTerm struct {
	// Name labels the term in the decision breakdown (explain, the decision
	// log, the node_score_term metric).
	Name string
	// Key is its weight's configuration key, scoring.weights.<Key>.
	Key string
	// Doc defines the value, with its normalisation and range.
	Doc string
	// Reads lists the inputs the value is computed from.
	Reads string
	// Default is the weight the configuration starts from.
	Default float64
	// Subtracted terms are better when higher: the breakdown carries
	// −weight, so a higher value lowers the total.
	Subtracted bool
	// Prepare is called once per decision with what every term sees, so
	// that a normalisation over the eligible workers (a maximum) is
	// computed once; it returns the function giving each worker's value,
	// or an unknown Signal when the worker has no fresh data. An unknown
	// value contributes 0 and is listed as unknown in the breakdown.
	Prepare func(in *TermInput) TermFunc
}

// TermFunc is a snapshot term's value for one eligible worker.
type TermFunc func(w *Worker) Signal

// TermInput is what every snapshot term sees for one decision.
type TermInput struct {
	Job      Job
	Eligible []Worker // the workers being scored
	Params   Params
}

// PerWorker is Prepare for a term that needs nothing but the worker.
func PerWorker(f TermFunc) func(*TermInput) TermFunc {
	return func(*TermInput) TermFunc { return f }
}

// Fresh returns a, or the zero Average (unknown, not zero) when it is
// older than Params.Staleness.
func (in *TermInput) Fresh(a Average) Average {
	if in.Params.Staleness > 0 && a.Age > in.Params.Staleness {
		return Average{}
	}
	return a
}

// MaxFresh is the largest fresh, measured value of f over the eligible
// workers; 0 when none has one.
func (in *TermInput) MaxFresh(f func(w *Worker) Average) float64 {
	m := 0.0
	for i := range in.Eligible {
		if a := in.Fresh(f(&in.Eligible[i])); a.Samples > 0 && a.Value > m {
			m = a.Value
		}
	}
	return m
}

// ratio is a/maxV in [0,1], unknown when a has no samples or maxV is 0.
func ratio(a Average, maxV float64) Signal {
	if a.Samples == 0 || maxV <= 0 {
		return Signal{}
	}
	return Known(a.Value / maxV)
}

// weight is the term's signed weight under w.
func (t SnapshotTerm) weight(w Weights) float64 {
	v := w.Terms[t.Key]
	if t.Subtracted {
		return -v
	}
	return v
}
