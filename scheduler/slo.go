package scheduler

import "time"

// SLO is a request's latency objectives: the time to its first token
// (TTFT) and the time per output token after it (TPOT), each with where it
// came from. The decision records them; placement and admission do not
// read them yet.
type SLO struct {
	TTFT Objective `json:"ttft"`
	TPOT Objective `json:"tpot"`
}

// Objective is one latency objective.
type Objective struct {
	Seconds float64   `json:"seconds"`
	Source  SLOSource `json:"source"`
}

// NewObjective is an objective of d from source.
func NewObjective(d time.Duration, source SLOSource) Objective {
	return Objective{Seconds: d.Seconds(), Source: source}
}

// Duration is the objective as a time.Duration.
func (o Objective) Duration() time.Duration {
	return time.Duration(o.Seconds * float64(time.Second))
}

// SLOSource is where an objective came from.
type SLOSource string

// The sources of an objective, from the most specific to the least.
const (
	// SLOHeader: the request's header, within its key's bound.
	SLOHeader SLOSource = "header"
	// SLOClamped: the request's header asked for tighter than its key
	// allows; the objective is the key's bound.
	SLOClamped SLOSource = "clamped"
	// SLOObjective: the configuration of the request's llm-d inference
	// objective (slo.objectives).
	SLOObjective SLOSource = "objective"
	// SLOConfig: the configuration of the request's model and priority
	// (slo.models).
	SLOConfig SLOSource = "config"
	// SLODefault: the router's default (slo.ttft, slo.tpot).
	SLODefault SLOSource = "default"
)
