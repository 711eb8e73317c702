package telemetry

import (
	"testing"
)

func TestReadLoRAGauge(t *testing.T) {
	text := `# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql",waiting_lora_adapters=""} 1.7e9
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql,chat",waiting_lora_adapters="math"} 1.70000001e9
vllm:num_requests_running{model_name="base"} 3
`
	r, err := ParseMetrics(FormatVLLM, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	a := r.Adapters
	if a == nil || a.MaxLoras != 4 || len(a.Running) != 2 || a.Running[1] != "chat" || len(a.Waiting) != 1 || a.Waiting[0] != "math" {
		t.Fatalf("adapters %+v; want the latest series: sql, chat running, math waiting, 4 slots", a)
	}
	r, err = ParseMetrics(FormatVLLM, []byte("vllm:num_requests_running 1\n"))
	if err != nil || r.Adapters != nil {
		t.Fatalf("no gauge: adapters %+v, err %v; want none", r.Adapters, err)
	}
}

func TestParseModels(t *testing.T) {
	body := `{"object":"list","data":[{"id":"base","root":"/m","parent":null},{"id":"sql","root":"/lora/sql","parent":"base"},{"id":"x","parent":"x"}]}`
	got, err := ParseModels([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "sql" || got[0].Base != "base" {
		t.Fatalf("adapters %+v; want sql of base", got)
	}
	if _, err := ParseModels([]byte("not json")); err == nil {
		t.Fatal("bad body: no error")
	}
}
