package scoring

import "testing"

func TestTermQueue(t *testing.T) {
	runTermCases(t, "queue", []termCase{
		{name: "as reported, not normalised", workers: []Worker{
			worker("a", func(w *Worker) { w.Queue = Known(7) }),
			worker("b", func(w *Worker) { w.Queue = Known(0) }),
		}, want: []Signal{Known(7), Known(0)}},
		{name: "unknown when not scraped", workers: []Worker{worker("a")}, want: []Signal{{}}},
	})
}
