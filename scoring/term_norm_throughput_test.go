package scoring

import "testing"

func TestTermNormThroughput(t *testing.T) {
	runTermCases(t, "norm_throughput", []termCase{
		{name: "over the largest", workers: []Worker{
			worker("a", func(w *Worker) { w.TokensPerSec = avg(25, 5) }),
			worker("b", func(w *Worker) { w.TokensPerSec = avg(100, 5) }),
			worker("new"),
		}, want: []Signal{Known(0.25), Known(1), {}}},
	})
	for _, tm := range Terms() {
		if tm.Name == "norm_throughput" && !tm.Subtracted {
			t.Error("norm_throughput must be subtracted: more throughput is better")
		}
	}
}
