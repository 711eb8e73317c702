package scoring

import (
	"testing"
	"time"
)

func TestTermNormJobCost(t *testing.T) {
	p := Params{JobCostScale: 10 * time.Second, Staleness: time.Minute}
	slow := worker("slow", func(w *Worker) { w.TTFT, w.TokensPerSec = avg(1, 5), avg(10, 5) })
	runTermCases(t, "norm_job_cost", []termCase{
		// cost = 1 + 5/10 = 1.5 s → 1.5/11.5
		{name: "short job", job: Job{MaxTokens: 10}, params: p, workers: []Worker{slow}, want: []Signal{Known(1.5 / 11.5)}},
		// cost = 1 + 1000/10 = 101 s → 101/111
		{name: "long job", job: Job{MaxTokens: 2000}, params: p, workers: []Worker{slow}, want: []Signal{Known(101.0 / 111)}},
		// out_est = DefaultOutputTokens/2 = 128: cost = 128/10 = 12.8 s (no TTFT yet)
		{name: "no max_tokens, no ttft", params: p, workers: []Worker{
			worker("a", func(w *Worker) { w.TokensPerSec = avg(10, 5) }),
		}, want: []Signal{Known(12.8 / 22.8)}},
		{name: "unknown without tokens/s", params: p, workers: []Worker{worker("a")}, want: []Signal{{}}},
		{name: "unknown when tokens/s is stale", params: p, workers: []Worker{
			worker("a", func(w *Worker) { w.TokensPerSec = Average{Value: 10, Samples: 5, Age: time.Hour} }),
		}, want: []Signal{{}}},
	})
}
