package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llm-router/llm-router/state"
)

// LoRA adapters, as a vLLM engine reports them: the gauge
// vllm:lora_requests_info, one series per change of its labels
// running_lora_adapters and waiting_lora_adapters (comma-separated
// names) and max_lora, valued at the time of the change (the latest
// series is the current one); and GET /v1/models, which lists each
// registered adapter with its base model as parent. The gauge names only
// adapters with requests; the listing says which adapters the engine
// holds at all, so a worker's report needs both (AdapterReport).

const loraName = "vllm:lora_requests_info"

// AdapterReading is what the gauge said.
type AdapterReading struct {
	Running, Waiting []string
	MaxLoras         int
}

// readLoRA reads the latest series of the gauge (nil: absent).
func readLoRA(format string, fams map[string]*dto.MetricFamily) *AdapterReading {
	f, ok := fams[loraName]
	if format != FormatVLLM || !ok {
		return nil
	}
	var out *AdapterReading
	latest := 0.0
	for _, m := range f.GetMetric() {
		v := m.GetGauge().GetValue()
		if out != nil && v < latest {
			continue
		}
		r := AdapterReading{}
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "running_lora_adapters":
				r.Running = splitNames(l.GetValue())
			case "waiting_lora_adapters":
				r.Waiting = splitNames(l.GetValue())
			case "max_lora":
				r.MaxLoras, _ = strconv.Atoi(l.GetValue())
			}
		}
		out, latest = &r, v
	}
	return out
}

func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ParseModels reads an OpenAI /v1/models answer: the adapters it lists,
// those with a parent other than themselves.
func ParseModels(body []byte) ([]state.Adapter, error) {
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("parse /v1/models: %w", err)
	}
	var out []state.Adapter
	for _, m := range list.Data {
		if m.Parent != nil && *m.Parent != "" && *m.Parent != m.ID {
			out = append(out, state.Adapter{Name: m.ID, Base: *m.Parent})
		}
	}
	return out, nil
}

// servesAdapters reports whether the monitor reads spec's adapters: it
// declares some, or slots, or its engine exports the gauge.
func servesAdapters(spec state.WorkerSpec, r *AdapterReading) bool {
	return len(spec.Adapters) > 0 || spec.MaxLoras > 0 || r != nil
}

// adapterReport reads spec's /v1/models and makes the report with the
// gauge's reading r (nil: none). An unread listing leaves the report
// unknown: the gauge alone does not name idle adapters, and a report
// that seemed to drop them would drop their placement.
func (m *Monitor) adapterReport(ctx context.Context, spec state.WorkerSpec, r *AdapterReading, at time.Time) (state.AdapterReport, error) {
	body, err := m.get(ctx, urlOr("", spec.Address, "/v1/models"))
	if err != nil {
		return state.AdapterReport{}, err
	}
	listed, err := ParseModels(body)
	if err != nil {
		return state.AdapterReport{}, err
	}
	rep := state.AdapterReport{Listed: listed, At: at}
	if r != nil {
		rep.Running, rep.Waiting, rep.MaxLoras = r.Running, r.Waiting, r.MaxLoras
	}
	return rep, nil
}
