package scoring

import "testing"

func TestTermKVPressure(t *testing.T) {
	runTermCases(t, "kv_pressure", []termCase{
		{name: "the scraped fraction", workers: []Worker{
			worker("a", func(w *Worker) { w.KVPressure = Known(0.9) }),
			worker("b", func(w *Worker) { w.KVPressure = Known(0.1) }),
		}, want: []Signal{Known(0.9), Known(0.1)}},
		{name: "unknown when not scraped", workers: []Worker{worker("a")}, want: []Signal{{}}},
	})
}
