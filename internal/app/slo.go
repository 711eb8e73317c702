package app

import (
	"github.com/llm-router/llm-router/extproc"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

// sloPolicy is the slo section as the ext_proc adapter applies it.
func sloPolicy(c config.SLO) extproc.SLOPolicy {
	p := extproc.SLOPolicy{
		TTFT: c.TTFT.D(), TPOT: c.TPOT.D(),
		MinTTFT: c.MinTTFT.D(), MinTPOT: c.MinTPOT.D(),
	}
	targets := func(t config.SLOTargets) extproc.SLOTargets {
		return extproc.SLOTargets{TTFT: t.TTFT.D(), TPOT: t.TPOT.D()}
	}
	for model, byPriority := range c.Models {
		if p.Models == nil {
			p.Models = map[string]map[state.Priority]extproc.SLOTargets{}
		}
		p.Models[model] = map[state.Priority]extproc.SLOTargets{}
		for prio, t := range byPriority {
			p.Models[model][prio] = targets(t)
		}
	}
	for name, t := range c.Objectives {
		if p.Objectives == nil {
			p.Objectives = map[string]extproc.SLOTargets{}
		}
		p.Objectives[name] = targets(t)
	}
	return p
}
