package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "gpu_util", Key: "gpu_util", Default: 15,
		Doc:     "GPU utilisation fraction, in [0,1]",
		Reads:   "Worker.GPUUtil (a DCGM exporter's DCGM_FI_DEV_GPU_UTIL / 100, when the worker names one)",
		Prepare: PerWorker(func(w *Worker) Signal { return w.GPUUtil }),
	})
}
