package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llm-router/llm-router/scheduler"
)

// The native API's decision carries the request's latency objectives and
// their sources, and none when the record has none (an older replica's).
func TestDecisionSLO(t *testing.T) {
	d := &scheduler.Decision{RequestID: "r", SLO: scheduler.SLO{
		TTFT: scheduler.NewObjective(300*time.Millisecond, scheduler.SLOClamped),
		TPOT: scheduler.NewObjective(50*time.Millisecond, scheduler.SLOConfig),
	}}
	got := decision(d).GetSlo()
	if got.GetTtft().GetSeconds() != 0.3 || got.GetTtft().GetSource() != "clamped" ||
		got.GetTpot().GetSeconds() != 0.05 || got.GetTpot().GetSource() != "config" {
		t.Fatalf("slo %v", got)
	}
	raw, err := protojson.Marshal(decision(d))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"slo":{"ttft":{"seconds":0.3,"source":"clamped"},"tpot":{"seconds":0.05,"source":"config"}}`; !strings.Contains(strings.ReplaceAll(string(raw), " ", ""), want) {
		t.Fatalf("JSON %s lacks %s", raw, want)
	}
	if decision(&scheduler.Decision{RequestID: "old"}).GetSlo() != nil {
		t.Fatal("a record without objectives must not show zero ones")
	}
}

// A worker with no max_concurrency shows "none" in /stats, not 0 (which
// would read as a worker that takes nothing).
func TestNoCeilingShowsAsNone(t *testing.T) {
	for c, want := range map[ceiling]string{0: `"none"`, 6: `6`} {
		got, err := json.Marshal(c)
		if err != nil || string(got) != want {
			t.Errorf("ceiling %d = %s, %v; want %s", c, got, err, want)
		}
	}
}
