package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "queue", Key: "queue", Default: 10,
		Doc: "requests waiting inside the worker, as it reports them; not normalised",
		Reads: "Worker.Queue (scraped: vLLM num_requests_waiting, SGLang num_queue_reqs, " +
			"llama.cpp requests_deferred, TensorRT-LLM num_requests_waiting)",
		Prepare: PerWorker(func(w *Worker) Signal { return w.Queue }),
	})
}
