package gpusim

import (
	"bytes"
	"strconv"
	"strings"
)

// promText writes the Prometheus text exposition format (0.0.4).
type promText struct{ b bytes.Buffer }

func (p *promText) family(name, typ, help string) {
	p.b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one series; labels are name, value pairs.
func (p *promText) sample(name string, v float64, labels ...string) {
	p.b.WriteString(name)
	if len(labels) > 0 {
		p.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
		}
		p.b.WriteByte('}')
	}
	p.b.WriteByte(' ')
	p.b.WriteString(formatValue(v))
	p.b.WriteByte('\n')
}

func (p *promText) histogram(name string, h histogram, labels ...string) {
	var cum uint64
	for i, le := range h.bounds {
		cum += h.counts[i]
		p.sample(name+"_bucket", float64(cum), append(labels, "le", formatValue(le))...)
	}
	p.sample(name+"_bucket", float64(h.count), append(labels, "le", "+Inf")...)
	p.sample(name+"_sum", h.sum, labels...)
	p.sample(name+"_count", float64(h.count), labels...)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// perModel writes a family with one series per model.
func (p *promText) perModel(sn snapshot, name, typ, help string, v func(modelStats) float64) {
	p.family(name, typ, help)
	for _, m := range sn.models {
		p.sample(name, v(sn.perModel[m]), "model_name", m)
	}
}

// renderMetrics renders sn under the metric names of format. Queue gauges
// and counters are per model; KV figures are the GPU's, repeated on each
// model's series.
func renderMetrics(format string, sn snapshot) []byte {
	var p promText
	kv := sn.KVUsage()
	same := func(v float64) func(modelStats) float64 { return func(modelStats) float64 { return v } }
	running := func(m modelStats) float64 { return float64(m.Running) }
	waiting := func(m modelStats) float64 { return float64(m.Waiting) }
	hitRate := func(m modelStats) float64 {
		if m.PrefixQueries == 0 {
			return 0
		}
		return float64(m.PrefixHits) / float64(m.PrefixQueries)
	}
	switch format {
	case FormatVLLM, FormatVLLMLegacy, FormatVLLMV1:
		p.perModel(sn, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", running)
		p.perModel(sn, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", waiting)
		if format != FormatVLLMLegacy {
			p.perModel(sn, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", same(kv))
		}
		if format != FormatVLLMV1 {
			p.perModel(sn, "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.", same(kv))
		}
		p.perModel(sn, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
			func(m modelStats) float64 { return float64(m.PromptTokens) })
		p.perModel(sn, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
			func(m modelStats) float64 { return float64(m.GenerationTokens) })
		p.perModel(sn, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.",
			func(m modelStats) float64 { return float64(m.Preemptions) })
		// vLLM declares these Counters as vllm:prefix_cache_queries and
		// vllm:prefix_cache_hits (tokens); prometheus_client exposes a
		// Counter with _total appended. Before they were renamed along with
		// gpu_cache_usage_perc, V1 named them vllm:gpu_prefix_cache_*; the
		// formats follow the usage gauge's naming (vllm: both).
		queries := func(m modelStats) float64 { return float64(m.PrefixQueries) }
		hits := func(m modelStats) float64 { return float64(m.PrefixHits) }
		if format != FormatVLLMLegacy {
			p.perModel(sn, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", queries)
			p.perModel(sn, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", hits)
		}
		if format != FormatVLLMV1 {
			p.perModel(sn, "vllm:gpu_prefix_cache_queries_total", "counter", "GPU prefix cache queries, in terms of number of queried tokens.", queries)
			p.perModel(sn, "vllm:gpu_prefix_cache_hits_total", "counter", "GPU prefix cache hits, in terms of number of cached tokens.", hits)
		}
		// vLLM's engine publishes its cache configuration as an info
		// gauge; num_gpu_blocks is what its KV cache holds, in blocks of
		// block_size tokens.
		p.family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
		p.sample("vllm:cache_config_info", 1, "block_size", "16", "num_gpu_blocks", strconv.Itoa(sn.KVCapacityTokens/16))
		if l := sn.LoRA; l != nil {
			// vLLM sets this gauge to the time of its latest update, the
			// adapters as comma-separated label values (running: with
			// requests in the batch; waiting: with requests queued).
			// vLLM leaves the series of earlier label values behind, and
			// a scraper takes the one with the highest value; gpusim
			// shows the current one alone.
			at := sn.nowUnix
			if at == 0 {
				at = 1
			}
			p.family("vllm:lora_requests_info", "gauge", "Running stats on lora requests.")
			p.sample("vllm:lora_requests_info", at, "max_lora", strconv.Itoa(l.MaxLoras),
				"running_lora_adapters", strings.Join(l.Running, ","), "waiting_lora_adapters", strings.Join(l.Waiting, ","))
		}
		if sn.startedUnix > 0 {
			p.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
			p.sample("process_start_time_seconds", sn.startedUnix)
		}
		p.family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
		for _, name := range sn.models {
			m := sn.perModel[name]
			p.sample("vllm:request_success_total", float64(m.SuccessLength), "model_name", name, "finished_reason", "length")
			p.sample("vllm:request_success_total", float64(m.SuccessStop), "model_name", name, "finished_reason", "stop")
		}
		p.family("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.")
		for _, name := range sn.models {
			p.histogram("vllm:time_to_first_token_seconds", sn.perModel[name].TTFT, "model_name", name)
		}
		// vLLM named the gaps between tokens time_per_output_token_seconds,
		// and later inter_token_latency_seconds (the older name went to a
		// per-request mean); the formats follow the usage gauge's naming.
		if format != FormatVLLMLegacy {
			p.family("vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.")
			for _, name := range sn.models {
				p.histogram("vllm:inter_token_latency_seconds", sn.perModel[name].ITL, "model_name", name)
			}
		}
		if format != FormatVLLMV1 {
			p.family("vllm:time_per_output_token_seconds", "histogram", "Histogram of time per output token in seconds.")
			for _, name := range sn.models {
				p.histogram("vllm:time_per_output_token_seconds", sn.perModel[name].ITL, "model_name", name)
			}
		}
		p.family("vllm:e2e_request_latency_seconds", "histogram", "Histogram of end to end request latency in seconds.")
		for _, name := range sn.models {
			p.histogram("vllm:e2e_request_latency_seconds", sn.perModel[name].E2E, "model_name", name)
		}
		if sn.kvConnector {
			renderNIXL(&p, sn)
		}
	case FormatSGLang:
		p.perModel(sn, "sglang:num_running_reqs", "gauge", "The number of running requests.", running)
		p.perModel(sn, "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", waiting)
		p.perModel(sn, "sglang:token_usage", "gauge", "The token usage.", same(kv))
		p.perModel(sn, "sglang:num_used_tokens", "gauge", "The number of used tokens.", same(float64(sn.KVUsedTokens)))
		p.perModel(sn, "sglang:gen_throughput", "gauge", "The generation throughput (token/s).", same(sn.genThroughput))
		// SGLang reports the hit rate of its latest prefill batches; ours
		// is since start, steadier for a scraper that samples it.
		p.perModel(sn, "sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", hitRate)
	case FormatLlamaCpp:
		// llama-server exposes no prefix cache figure (its per-slot prompt
		// cache is not modelled either).
		var prompt, predicted uint64
		for _, m := range sn.perModel {
			prompt += m.PromptTokens
			predicted += m.GenerationTokens
		}
		p.family("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.")
		p.sample("llamacpp:prompt_tokens_total", float64(prompt))
		p.family("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.")
		p.sample("llamacpp:tokens_predicted_total", float64(predicted))
		p.family("llamacpp:n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call.")
		p.sample("llamacpp:n_busy_slots_per_decode", sn.busyPerStep)
		p.family("llamacpp:requests_processing", "gauge", "Number of requests processing.")
		p.sample("llamacpp:requests_processing", float64(sn.Running))
		p.family("llamacpp:requests_deferred", "gauge", "Number of requests deferred.")
		p.sample("llamacpp:requests_deferred", float64(sn.Waiting))
	case FormatTRTLLM:
		p.perModel(sn, "trtllm_num_requests_waiting", "gauge", "Number of requests waiting.", waiting)
		p.perModel(sn, "trtllm_num_requests_running", "gauge", "Number of requests running.", running)
		p.perModel(sn, "trtllm_kv_cache_utilization", "gauge", "KV cache utilization, 0 to 1.", same(kv))
		// TensorRT-LLM's is reused over reused plus missed blocks, since
		// start; ours is the same ratio in tokens.
		p.perModel(sn, "trtllm_kv_cache_hit_rate", "gauge", "KV cache hit rate, 0 to 1.", hitRate)
	}
	return p.b.Bytes()
}

// renderNIXL writes the KV connector's figures as vLLM's NIXL connector
// exposes them, where the KV is loaded: the decode worker.
func renderNIXL(p *promText, sn snapshot) {
	p.family("vllm:nixl_xfer_time_seconds", "histogram", "Histogram of transfer duration for NIXL KV Cache transfers.")
	for _, name := range sn.models {
		p.histogram("vllm:nixl_xfer_time_seconds", sn.perModel[name].XferTime, "model_name", name)
	}
	p.family("vllm:nixl_bytes_transferred", "histogram", "Histogram of bytes transferred per NIXL KV Cache transfers.")
	for _, name := range sn.models {
		p.histogram("vllm:nixl_bytes_transferred", sn.perModel[name].XferBytes, "model_name", name)
	}
	p.perModel(sn, "vllm:nixl_num_failed_transfers_total", "counter", "Number of failed NIXL KV Cache transfers.",
		func(m modelStats) float64 { return float64(m.FailedTransfers) })
}
