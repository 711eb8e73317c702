package scoring

import "testing"

func TestTermNodeDistance(t *testing.T) {
	runTermCases(t, "node_distance", []termCase{
		{name: "the worker's distance, always known", workers: []Worker{
			worker("near"),
			worker("region", func(w *Worker) { w.Distance = 0.5 }),
			worker("far", func(w *Worker) { w.Distance = 1 }),
		}, want: []Signal{Known(0), Known(0.5), Known(1)}},
	})
}

func TestDistance(t *testing.T) {
	tests := []struct {
		wz, wr, z, r string
		want         float64
	}{
		{"a", "eu", "a", "eu", 0},
		{"b", "eu", "a", "eu", 0.5},
		{"c", "us", "a", "eu", 1},
		{"c", "us", "", "", 0},
		{"", "", "a", "eu", 0},
	}
	for _, tc := range tests {
		if got := Distance(tc.wz, tc.wr, tc.z, tc.r); got != tc.want {
			t.Errorf("Distance(%q,%q,%q,%q) = %v, want %v", tc.wz, tc.wr, tc.z, tc.r, got, tc.want)
		}
	}
}
