package stats

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	tests := []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {10, 1}, {11, 2}, {50, 5}, {90, 9}, {99, 10}, {100, 10}}
	for _, tt := range tests {
		if got := Percentile(ds, tt.p); got != tt.want {
			t.Errorf("Percentile(p%g) = %d, want %d", tt.p, got, tt.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty input must give 0")
	}
	if ds[0] != 5 {
		t.Error("Percentile sorted its input in place")
	}
}

func TestNearestRank(t *testing.T) {
	for _, tt := range []struct {
		n    int
		p    float64
		want int
	}{{1, 99, 1}, {100, 99, 99}, {140, 99, 139}, {200, 50, 100}, {3, 0, 1}, {3, 150, 3}} {
		if got := nearestRank(tt.n, tt.p); got != tt.want {
			t.Errorf("nearestRank(%d, %g) = %d, want %d", tt.n, tt.p, got, tt.want)
		}
	}
}

func TestMeanCV(t *testing.T) {
	tests := []struct {
		xs       []float64
		mean, cv float64
	}{
		{nil, 0, 0},
		{[]float64{30, 30, 30}, 30, 0},
		{[]float64{10, 30}, 20, 0.5}, // population stddev 10
		{[]float64{0, 0}, 0, 0},
	}
	for _, tt := range tests {
		mean, cv := MeanCV(tt.xs)
		if math.Abs(mean-tt.mean) > 1e-9 || math.Abs(cv-tt.cv) > 1e-9 {
			t.Errorf("MeanCV(%v) = %g, %g; want %g, %g", tt.xs, mean, cv, tt.mean, tt.cv)
		}
	}
}

func TestBoundPercentile(t *testing.T) {
	bs := []bound{{100, false}, {300, false}, {200, false}, {50, true}}
	// The lower bound sorts last whatever its value.
	if v, lower := boundPercentile(bs, 50); v != 200 || lower {
		t.Errorf("p50 = %v lower %v, want 200 exact", v, lower)
	}
	if v, lower := boundPercentile(bs, 99); v != 50 || !lower {
		t.Errorf("p99 = %v lower %v, want the bound 50, flagged", v, lower)
	}
	if v, lower := boundPercentile(nil, 50); v != 0 || lower {
		t.Error("empty input must give 0")
	}
}

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in            []float64
		med, min, max float64
	}{
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 2, 3}, 2.5, 1, 4},
		{[]float64{7}, 7, 7, 7},
	} {
		s := SpreadOf(tc.in)
		if s.Median != tc.med || s.Min != tc.min || s.Max != tc.max || len(s.Rounds) != len(tc.in) {
			t.Errorf("SpreadOf(%v) = %+v, want median %v in [%v, %v]", tc.in, s, tc.med, tc.min, tc.max)
		}
	}
	if s := SpreadOf(nil); s.Median != 0 || s.Rounds != nil {
		t.Errorf("SpreadOf(nil) = %+v", s)
	}
}
