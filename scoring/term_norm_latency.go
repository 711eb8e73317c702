package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "norm_latency", Key: "latency", Default: 5,
		Doc:   "latency_w / max over the eligible workers with a fresh latency, in [0,1]",
		Reads: "Worker.Latency (moving average of end-to-end request latency) of every eligible worker",
		Prepare: func(in *TermInput) TermFunc {
			m := in.MaxFresh(func(w *Worker) Average { return w.Latency })
			return func(w *Worker) Signal { return ratio(in.Fresh(w.Latency), m) }
		},
	})
}
