package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "norm_throughput", Key: "throughput", Default: 3, Subtracted: true,
		Doc:   "tps_w / max over the eligible workers with a fresh tokens/s, in [0,1]",
		Reads: "Worker.TokensPerSec (moving average of decode tokens per second) of every eligible worker",
		Prepare: func(in *TermInput) TermFunc {
			m := in.MaxFresh(func(w *Worker) Average { return w.TokensPerSec })
			return func(w *Worker) Signal { return ratio(in.Fresh(w.TokensPerSec), m) }
		},
	})
}
