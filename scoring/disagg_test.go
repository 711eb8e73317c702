package scoring

import "testing"

func TestDisaggregate(t *testing.T) {
	for _, tc := range []struct {
		uncached, min int
		want          bool
	}{
		{uncached: 1024, min: 256, want: true},
		{uncached: 256, min: 256, want: true},
		{uncached: 255, min: 256, want: false},
		{uncached: 0, min: 256, want: false},
		{uncached: 0, min: 0, want: false}, // fully cached: never
		{uncached: 1, min: 0, want: true},  // llm-d's 0: whenever anything is uncached
	} {
		if got := Disaggregate(tc.uncached, tc.min); got != tc.want {
			t.Errorf("Disaggregate(%d, %d) = %v, want %v", tc.uncached, tc.min, got, tc.want)
		}
	}
}
