package scheduler

import (
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
)

// This file holds admission by prediction: how long a request may wait for
// a worker that meets its objectives, and the features a claim or a grant
// was decided on.

// waitBounder is implemented by strategies that enforce the request's
// objectives in the claim (predicted): a request no worker can take within
// them waits, and IdleTTFT says how long waiting can still help.
type waitBounder interface {
	IdleTTFT(j scoring.Job, eligible []scoring.Worker) (time.Duration, bool)
}

// objectiveWait bounds a request's wait by its TTFT objective.
type objectiveWait struct {
	on   bool          // the strategy enforces objectives and a bound applies
	idle time.Duration // the best idle TTFT predicted among the eligible
	wait time.Duration // objective − idle: the longest wait from the decision's start
}

// pending is what a queued request was planned with.
type pending struct {
	job   scoring.Job
	cands []scoring.Candidate
	bound objectiveWait
}

// objectiveBound is how long after its decision started job may wait for a
// worker within its TTFT objective: the objective less the best TTFT an
// eligible worker is predicted to give it idle. None when the
// strategy enforces no objective, the job has no TTFT objective, or some
// eligible worker's model is unknown.
func (s *Scheduler) objectiveBound(job scoring.Job, workers []scoring.Worker) objectiveWait {
	if s.bounder == nil || job.Objectives.TTFT <= 0 {
		return objectiveWait{}
	}
	eligible, _ := scoring.Filter(job, workers)
	idle, ok := s.bounder.IdleTTFT(job, eligible)
	if !ok {
		return objectiveWait{}
	}
	return objectiveWait{on: true, idle: idle, wait: job.Objectives.TTFT - idle}
}

// ceilingRefused reports whether some candidate was available and under
// its cap but over its ceiling: the request was refused for its
// objectives, not for capacity.
func ceilingRefused(cands []scoring.Candidate, res state.ClaimResult) bool {
	for i, c := range cands {
		if c.LiveWeights.Ceiling > 0 && i < len(res.Available) && res.Available[i] && !c.Full(res.Active[i]) {
			return true
		}
	}
	return false
}

// claimFeatures are the latency model's inputs the claim decided on for
// candidate i (worker): the live figures it read, or without them the
// snapshot's with the live in-flight count.
func claimFeatures(job scoring.Job, p scoring.Prompt, res state.ClaimResult, i int, worker string, workers []scoring.Worker) latency.Features {
	if i < len(res.Live) {
		return scoring.LiveFeatures(p, res.Active[i], res.Live[i])
	}
	for j := range workers {
		if workers[j].ID == worker {
			f := workers[j].Features(job)
			if i < len(res.Active) {
				f.Running = res.Active[i]
			}
			return f
		}
	}
	return latency.Features{Uncached: job.PromptTokens, Output: job.DecodeTokens()}
}

// grantFeatures are the latency model's inputs for a waiter granted
// worker: the latest snapshot's figures (the grant read no live ones, and
// holds the whole prompt uncached), and the ceiling it was planned with
// there.
func (s *Scheduler) grantFeatures(p pending, worker string) (latency.Features, float64) {
	ceiling := 0.0
	for _, c := range p.cands {
		if c.Worker == worker {
			ceiling = c.LiveWeights.Ceiling
		}
	}
	if v := s.view.Load(); v != nil {
		if i, ok := v.index[worker]; ok {
			return v.workers[i].Features(p.job), ceiling
		}
	}
	return latency.Features{Uncached: p.job.PromptTokens, Output: p.job.DecodeTokens()}, ceiling
}

// LatencyModel is worker's latency model for model as fitted at the last
// snapshot (the one the scheduler predicts and learns with; Unknown while
// the worker has too little history), or the default prior's for a
// worker or model the snapshot does not have.
func (s *Scheduler) LatencyModel(worker, model string) latency.Model {
	if v := s.view.Load(); v != nil {
		if i, ok := v.index[worker]; ok {
			if m, ok := v.workers[i].LatencyModels[model]; ok {
				return m
			}
		}
	}
	return s.prior
}
