package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "kv_pressure", Key: "kv_pressure", Default: 15,
		Doc: "the worker's KV-cache usage fraction, in [0,1]",
		Reads: "Worker.KVPressure (scraped: vLLM kv_cache_usage_perc or gpu_cache_usage_perc, " +
			"SGLang token_usage, TensorRT-LLM kv_cache_utilization, llama.cpp the share of busy /slots)",
		Prepare: PerWorker(func(w *Worker) Signal { return w.KVPressure }),
	})
}
