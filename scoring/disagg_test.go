package scoring

import "testing"

func TestDisaggregate(t *testing.T) {
	for _, tc := range []struct {
		uncached, prompt, min int
		want                  bool
	}{
		{uncached: 1024, prompt: 1024, min: 256, want: true},
		{uncached: 256, prompt: 256, min: 256, want: true},
		{uncached: 255, prompt: 255, min: 256, want: false},
		{uncached: 0, prompt: 4096, min: 256, want: false},
		{uncached: 0, prompt: 4096, min: 0, want: false}, // fully cached: never
		{uncached: 1, prompt: 1, min: 0, want: true},     // llm-d's 0: whenever anything is uncached
		{uncached: 2048, prompt: 4096, min: 256, want: true},
		{uncached: 2047, prompt: 4096, min: 256, want: false}, // mostly cached: never
		{uncached: 4000, prompt: 16000, min: 256, want: false},
	} {
		if got := Disaggregate(tc.uncached, tc.prompt, tc.min); got != tc.want {
			t.Errorf("Disaggregate(%d, %d, %d) = %v, want %v", tc.uncached, tc.prompt, tc.min, got, tc.want)
		}
	}
}
