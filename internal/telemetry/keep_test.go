package telemetry

import (
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// vllmFull is a vLLM exposition with what a real one carries besides the
// router's metrics: histograms, counters whose TYPE line omits _total
// (OpenMetrics style), an info metric with labels, the process metrics,
// blank lines and comments.
const vllmFull = `# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 12
vllm:time_to_first_token_seconds_sum{model_name="m"} 3.5
vllm:time_to_first_token_seconds_count{model_name="m"} 12
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4

# a comment that is neither HELP nor TYPE
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1
vllm:num_requests_waiting{model_name="n"} 2
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
# HELP vllm:prefix_cache_hits Prefix cache hits, in tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="m"} 4096
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 99999
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",num_gpu_blocks="1000"} 1
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
`

// TestKeptLinesParseAsTheWholeExposition: every family ParseMetrics reads
// parses the same from the kept lines as from the whole exposition.
func TestKeptLinesParseAsTheWholeExposition(t *testing.T) {
	for name, text := range map[string]string{
		"vllm full": vllmFull, "vllm v1": vllmV1, "vllm legacy": vllmLegacy, "vllm two models": vllmTwoModels,
		"sglang": sglang, "llamacpp": llamacpp, "trtllm": trtllm,
	} {
		for format, want := range wanted {
			full, err := parseText([]byte(text))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			kept := keepFamilies([]byte(text), want)
			part, err := parseText(kept)
			if err != nil {
				t.Fatalf("%s as %s: kept lines do not parse: %v\n%s", name, format, err, kept)
			}
			for metric := range want {
				if !proto.Equal(full[metric], part[metric]) {
					t.Errorf("%s as %s: %s differs:\nwhole %v\nkept  %v", name, format, metric, full[metric], part[metric])
				}
			}
			for metric := range part {
				if !want[metric] {
					t.Errorf("%s as %s: kept %s, which is not read", name, format, metric)
				}
			}
		}
	}
}

func TestParseMetricsReadsAFullExposition(t *testing.T) {
	r, err := ParseMetrics(FormatVLLM, []byte(vllmFull))
	if err != nil {
		t.Fatal(err)
	}
	if *r.Running != 4 || *r.Waiting != 3 || *r.KVUsage != 0.25 || *r.PrefixHits != 4096 || *r.StartTime != 1.7e9 || *r.KVBlocks != 2000 {
		t.Fatalf("running %v waiting %v kv %v hits %v start %v blocks %v", *r.Running, *r.Waiting, *r.KVUsage, *r.PrefixHits, *r.StartTime, *r.KVBlocks)
	}
	if strings.Contains(string(keepFamilies([]byte(vllmFull), wanted[FormatVLLM])), "time_to_first_token") {
		t.Fatal("a histogram the router does not read was kept")
	}
}

// BenchmarkParseMetrics parses an exposition the size of a real vLLM
// one: the router's metrics among 30 histograms of 20 buckets.
func BenchmarkParseMetrics(b *testing.B) {
	var sb strings.Builder
	for h := range 30 {
		name := "vllm:histogram_" + string(rune('a'+h%26)) + strings.Repeat("x", h/26)
		sb.WriteString("# TYPE " + name + " histogram\n")
		for le := range 20 {
			sb.WriteString(name + `_bucket{le="` + strconv.Itoa(le) + `",model_name="m"} 7` + "\n")
		}
		sb.WriteString(name + `_sum{model_name="m"} 1` + "\n" + name + `_count{model_name="m"} 7` + "\n")
	}
	text := []byte(sb.String() + vllmFull)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMetrics(FormatVLLM, text); err != nil {
			b.Fatal(err)
		}
	}
}
