package scoring

import "testing"

func TestTermGPUUtil(t *testing.T) {
	runTermCases(t, "gpu_util", []termCase{
		{name: "the DCGM fraction", workers: []Worker{
			worker("a", func(w *Worker) { w.GPUUtil = Known(0.95) }),
		}, want: []Signal{Known(0.95)}},
		{name: "unknown without DCGM", workers: []Worker{worker("a")}, want: []Signal{{}}},
	})
}
