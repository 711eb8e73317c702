package state

import "testing"

func TestCapWith(t *testing.T) {
	for _, tc := range []struct{ cap, l, want int }{
		{8, 0, 8}, {8, 3, 3}, {8, 9, 8}, {0, 0, 0}, {0, 5, 5}, {-1, 0, 0},
	} {
		if got := CapWith(tc.cap, tc.l); got != tc.want {
			t.Errorf("CapWith(%d, %d) = %d, want %d", tc.cap, tc.l, got, tc.want)
		}
	}
}
