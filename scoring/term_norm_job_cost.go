package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "norm_job_cost", Key: "job_cost", Default: 2,
		Doc: "cost/(cost + job_cost_scale) in [0,1), cost = ttft + out_est/tokens_per_second: " +
			"the job's expected service time on the worker, out_est = 0.5·max_tokens " +
			"(or DefaultOutputTokens); saturating, so a long job pays more for a slow worker than a short one",
		Reads:   "Worker.TTFT and Worker.TokensPerSec (moving averages), Job.MaxTokens, Params.JobCostScale",
		Prepare: prepareJobCost,
	})
}

func prepareJobCost(in *TermInput) TermFunc {
	scale := in.Params.JobCostScale.Seconds()
	if scale <= 0 {
		scale = 10
	}
	out := in.Job.OutputEstimate()
	return func(w *Worker) Signal {
		tps := in.Fresh(w.TokensPerSec)
		if tps.Samples == 0 || tps.Value <= 0 {
			return Signal{}
		}
		cost := out / tps.Value
		if ttft := in.Fresh(w.TTFT); ttft.Samples > 0 {
			cost += ttft.Value
		}
		return Known(cost / (cost + scale))
	}
}
