package scoring

import (
	"testing"
	"time"
)

func TestTermNormLatency(t *testing.T) {
	stale := Params{Staleness: time.Minute}
	runTermCases(t, "norm_latency", []termCase{
		{name: "over the largest", workers: []Worker{
			worker("a", func(w *Worker) { w.Latency = avg(2, 5) }),
			worker("b", func(w *Worker) { w.Latency = avg(8, 5) }),
			worker("new"),
		}, want: []Signal{Known(0.25), Known(1), {}}},
		{name: "a stale average is unknown and not the maximum", params: stale, workers: []Worker{
			worker("a", func(w *Worker) { w.Latency = avg(2, 5) }),
			worker("old", func(w *Worker) { w.Latency = Average{Value: 100, Samples: 5, Age: time.Hour} }),
		}, want: []Signal{Known(1), {}}},
	})
}
