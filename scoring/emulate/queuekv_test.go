package emulate

import (
	"testing"

	"github.com/llm-router/llm-router/scoring"
)

// The cases are written in 64-token blocks (wide expands them into the
// 16-token blocks a job carries).
func TestPrefixQueueKVMaxScore(t *testing.T) {
	a, b := seq(1, 10), seq(2, 10)
	tests := []struct {
		name     string
		capacity int
		routed   map[string][]uint64 // worker → blocks routed there, in order
		tune     func(ws []scoring.Worker)
		req      scoring.Job
		want     string
		prefix   map[string]float64 // prefix_score per worker
	}{
		{
			name: "matched blocks over request blocks", routed: map[string][]uint64{"w2": a},
			req: job(a[:8], seq(3, 2)), want: "w2", prefix: map[string]float64{"w1": 0, "w2": 0.8},
		},
		{
			// 3·0.2 = 0.6 does not make up for the longest queue (2·1).
			name: "a short match loses to a free queue", routed: map[string][]uint64{"w2": a},
			tune: func(ws []scoring.Worker) { ws[1].Queue = scoring.Known(5) },
			req:  job(a[:2], seq(3, 8)), want: "w1", prefix: map[string]float64{"w2": 0.2},
		},
		{
			// 3·0.8 = 2.4 does.
			name: "a long match beats a free queue", routed: map[string][]uint64{"w2": a},
			tune: func(ws []scoring.Worker) { ws[1].Queue = scoring.Known(5) },
			req:  job(a[:8], seq(3, 2)), want: "w2",
		},
		{
			name: "high KV use counts against", routed: map[string][]uint64{"w2": a},
			tune: func(ws []scoring.Worker) { ws[1].KVPressure = scoring.Known(0.9) },
			req:  job(a[:3], seq(3, 7)), want: "w1", // 3·0.3 + 2·0.1 < 2·1
		},
		{
			name: "the LRU forgets the least recently routed", capacity: 10,
			routed: map[string][]uint64{"w2": append(append([]uint64{}, a...), b...)},
			req:    job(a), prefix: map[string]float64{"w2": 0},
		},
		{
			// Upstream's walk stops at the first block no server holds, and
			// credits every server holding a block before that.
			name: "the walk stops at the first block nobody holds",
			routed: map[string][]uint64{
				"w1": a[:4], "w2": append(append([]uint64{}, a[:2]...), a[5:]...),
			},
			req: job(a), want: "w1", prefix: map[string]float64{"w1": 0.4, "w2": 0.2},
		},
		{
			name: "only the first 131,072 tokens count", routed: map[string][]uint64{"w1": seq(4, 2100)},
			req: job(seq(4, 2048), seq(5, 44)), want: "w1", prefix: map[string]float64{"w1": 1},
		},
		{
			name: "a prompt under one block scores 0 everywhere", routed: map[string][]uint64{"w1": a},
			req: scoring.Job{Model: "m", PromptTokens: 10}, prefix: map[string]float64{"w1": 0, "w2": 0},
		},
		{
			// 63 tokens are three 16-token blocks and no 64-token one.
			name: "a prompt under 64 tokens scores 0", routed: map[string][]uint64{"w1": a},
			req: scoring.Job{Model: "m", PromptTokens: 63, Blocks: wide(a[:1])[:3]}, prefix: map[string]float64{"w1": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newPrefixQueueKV()
			if tc.capacity > 0 {
				s.index.capacity["w2"] = tc.capacity
			}
			for w, blocks := range tc.routed {
				s.Claimed("r-"+w, scoring.Job{Model: "m", Blocks: wide(blocks)}, w, t0)
			}
			ws := fleet(2)
			if tc.tune != nil {
				tc.tune(ws)
			}
			req := tc.req
			if len(req.Blocks) > 0 && req.PromptTokens != 63 {
				req = job(wide(req.Blocks))
			}
			got, cands := pick(t, s, req, t0, ws)
			if tc.want != "" && got != tc.want {
				t.Errorf("picked %s, want %s (%+v)", got, tc.want, cands)
			}
			for w, p := range tc.prefix {
				if v := term(t, cands, w, "prefix_score"); v != p {
					t.Errorf("%s prefix_score %g, want %g", w, v, p)
				}
			}
			// The queue and KV terms are queue_kv_max_score's, unchanged.
			term(t, cands, "w1", "queue_score")
			term(t, cands, "w1", "kv_score")
		})
	}
}
