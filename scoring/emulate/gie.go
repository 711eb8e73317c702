package emulate

import (
	"math"

	"github.com/llm-router/llm-router/scoring"
)

// queueKVMaxScore is queue_kv_max_score, the Gateway API Inference
// Extension's default scheduler: a queue scorer and a KV-utilisation
// scorer weighted 2:2, the highest total wins, random ties, on
// worker-reported metrics only (no view of in-flight claims). It keeps no
// state.
type queueKVMaxScore struct{}

func (queueKVMaxScore) Name() string { return QueueKVMaxScore }

// Plan scores queue = (maxQ − q)/(maxQ − minQ) over the candidates (1 when
// all are equal) and kv = 1 − kv_usage, total 2·queue + 2·kv, highest
// wins; as a curve: Base = −total, no dependence on in-flight claims. An
// unknown metric reads as idle (0), which is exactly how stale metrics
// mislead such a scheduler.
func (queueKVMaxScore) Plan(_ scoring.Input, eligible []scoring.Worker) []scoring.Candidate {
	minQ, maxQ := math.Inf(1), math.Inf(-1)
	for _, w := range eligible {
		q := w.Queue.Value
		minQ, maxQ = math.Min(minQ, q), math.Max(maxQ, q)
	}
	out := make([]scoring.Candidate, 0, len(eligible))
	for _, w := range eligible {
		qs := 1.0
		if maxQ > minQ {
			qs = (maxQ - w.Queue.Value) / (maxQ - minQ)
		}
		ks := 1 - w.KVPressure.Value
		queue := scoring.Term{Name: "queue_score", Weight: 2, Value: qs, Unknown: !w.Queue.Known}
		kv := scoring.Term{Name: "kv_score", Weight: 2, Value: ks, Unknown: !w.KVPressure.Known}
		out = append(out, scoring.Candidate{Worker: w.ID, Cap: w.MaxConcurrency, Curve: scoring.Curve{Base: -(2*qs + 2*ks)}, Terms: []scoring.Term{queue, kv}})
	}
	return out
}
