package memory

import "testing"

func TestMatchLenFindsTheLeadingRun(t *testing.T) {
	for n := 0; n <= 9; n++ {
		for run := 0; run <= n; run++ {
			calls := 0
			got := matchLen(n, func(i int) bool { calls++; return i < run })
			if got != run {
				t.Fatalf("n=%d run=%d: got %d", n, run, got)
			}
			if n > 0 && calls > 2+bitsLen(n) {
				t.Fatalf("n=%d: %d lookups, want O(log n)", n, calls)
			}
		}
	}
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}
