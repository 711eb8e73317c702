package stats

import "testing"

func TestVerdicts(t *testing.T) {
	r := Estimate{Value: 0.25, Lo: 0.2, Hi: 0.3}
	if AtMost(r, 0.5) != Met || AtMost(r, 0.1) != Missed || AtMost(r, r.Value) != NotSettled {
		t.Errorf("verdicts of %+v", r)
	}
	if AtLeast(r, 0.1) != Met || AtLeast(r, 0.5) != Missed {
		t.Errorf("AtLeast verdicts of %+v", r)
	}
}
