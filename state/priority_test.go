package state

import "testing"

func TestPriorityRankAndParse(t *testing.T) {
	for i, p := range Priorities() {
		if p.Rank() != i || !p.Valid() {
			t.Errorf("%s: rank %d, valid %v; want rank %d", p, p.Rank(), p.Valid(), i)
		}
	}
	tests := []struct {
		in   string
		want Priority
		ok   bool
	}{
		{"", PriorityStandard, true},
		{"critical", PriorityCritical, true},
		{"batch", PriorityBatch, true},
		{"urgent", "", false},
		{"Critical", "", false}, // header values are lower-cased by their reader
	}
	for _, tc := range tests {
		got, err := ParsePriority(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParsePriority(%q) = %q, %v", tc.in, got, err)
		}
	}
	if Priority("").Rank() != PriorityStandard.Rank() {
		t.Error("the empty priority does not rank as standard")
	}
}
