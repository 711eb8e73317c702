package emulate

import (
	"slices"
	"sync"

	"github.com/llm-router/llm-router/scoring"
)

// LoRAQueueKVMaxScore emulates the Gateway API Inference Extension's
// scheduler with its LoRA-affinity scorer beside the queue and KV
// scorers. It reads the engines' vllm:lora_requests_info, which only the
// fleet simulator feeds it (LoRAAffinity.Observe): the simulator
// registers this name, not this package.
const LoRAQueueKVMaxScore = "lora_queue_kv_max_score"

// Weights of the LoRA profile: queue 2 and KV utilisation 2 as the
// extension's default profile (queue_kv_max_score), and the LoRA-affinity
// scorer at 1, the weight the extension's configuration gives a scorer
// listed without one.
const gieLoRAWeight = 1

// The LoRA-affinity scorer's levels.
const (
	loraActive  = 1.0 // the adapter has requests running on the endpoint
	loraFree    = 0.8 // fewer adapters in use than max_lora: one may load
	loraWaiting = 0.6 // the adapter has requests waiting there
)

// LoRAInfo is what an engine's vllm:lora_requests_info says: the adapters
// with requests running and waiting, and max_lora.
type LoRAInfo struct {
	Running, Waiting []string
	MaxLoras         int
}

// LoRAAffinity is lora_queue_kv_max_score: total = 2·queue + 2·kv +
// 1·lora, highest wins, on worker-reported metrics only. queue and kv are
// queue_kv_max_score's (gie.go). lora, for the adapter the request names
// as its model:
//
//	1.0  the adapter is in the endpoint's running adapters
//	0.8  the running and waiting adapters together are fewer than max_lora
//	0.6  the adapter is in the endpoint's waiting adapters
//	0    otherwise (an endpoint with no LoRA figure scores 0 too)
//
// The levels are the extension's; it counts each adapter once over
// running and waiting, as vLLM may list one in both.
//
// Simplified: an endpoint's figures are the latest the caller observed
// (the simulator, at the metrics scrape period), with no staleness
// cut-off, as the extension keeps the last scrape.
type LoRAAffinity struct {
	queueKV queueKVMaxScore

	mu   sync.Mutex
	info map[string]LoRAInfo // endpoint → its latest figures
}

var _ scoring.Strategy = (*LoRAAffinity)(nil)

// NewLoRAAffinity returns an instance with no figures, for one router
// replica.
func NewLoRAAffinity() *LoRAAffinity {
	return &LoRAAffinity{info: map[string]LoRAInfo{}}
}

// Name is LoRAQueueKVMaxScore.
func (*LoRAAffinity) Name() string { return LoRAQueueKVMaxScore }

// Observe records an endpoint's scraped LoRA figures.
func (l *LoRAAffinity) Observe(endpoint string, info LoRAInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info[endpoint] = info
}

// loraScore is the LoRA-affinity scorer's value of info for adapter.
func loraScore(info LoRAInfo, adapter string) float64 {
	inUse := len(info.Running)
	for _, a := range info.Waiting {
		if !slices.Contains(info.Running, a) {
			inUse++
		}
	}
	switch {
	case slices.Contains(info.Running, adapter):
		return loraActive
	case inUse < info.MaxLoras:
		return loraFree
	case slices.Contains(info.Waiting, adapter):
		return loraWaiting
	}
	return 0
}

// Plan adds the weighted LoRA score to queue_kv_max_score's candidates:
// Base = −(2·queue + 2·kv + 1·lora).
func (l *LoRAAffinity) Plan(in scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	out := l.queueKV.Plan(in, eligible)
	adapter := in.Job.Adapter
	if adapter == "" {
		adapter = in.Job.Model // the base model: never an adapter that runs
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range out {
		info, ok := l.info[out[i].Worker]
		t := scoring.Term{Name: "lora_affinity", Weight: gieLoRAWeight, Value: loraScore(info, adapter), Unknown: !ok}
		out[i].Curve.Base -= t.Contribution()
		out[i].Terms = append(out[i].Terms, t)
	}
	return out
}
