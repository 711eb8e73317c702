package compare

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/benchmark/report"
	"github.com/llm-router/llm-router/benchmark/stats"
)

func TestAgreeJudgesTheSeedLevelIntervals(t *testing.T) {
	dir := t.TempDir()
	est := func(lo, v, hi, wlo, whi float64) stats.Estimate {
		return stats.Estimate{Value: v, Lo: lo, Hi: hi, Within: &[2]float64{wlo, whi}, Seeds: []float64{v}}
	}
	runs := [][2]stats.Estimate{
		// steady: every interval overlaps; drifting: only the seed level does
		{est(90, 100, 110, 95, 105), est(500, 600, 800, 560, 640)},
		{est(95, 105, 115, 100, 110), est(550, 700, 900, 660, 740)},
		{est(85, 98, 108, 92, 104), est(450, 520, 650, 500, 540)},
	}
	var paths []string
	for i, r := range runs {
		rep := report.Report{Name: "t", Stats: []stats.Stats{
			{Setup: "steady", Load: 0.8, Seeds: []uint64{1}, TTFT: [3]stats.Estimate{{}, r[0], {}}},
			{Setup: "drifting", Load: 0.8, Seeds: []uint64{1}, TTFT: [3]stats.Estimate{{}, r[1], {}}},
			{Setup: "overloaded", Load: 0.8}, // no seeds: left out
		}}
		b, _ := json.Marshal(rep)
		p := filepath.Join(dir, string(rune('a'+i))+".json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	as, err := Agree(paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || !as[0].Agree || !as[0].WithinAgree || !as[1].Agree || as[1].WithinAgree {
		t.Fatalf("agreements %+v", as)
	}
	var b bytes.Buffer
	if !PrintAgreement(&b, as) {
		t.Error("PrintAgreement: not all agree")
	}
	if !strings.Contains(b.String(), "2 of 2 overlap; 1 of 2 on the intervals without the seed level") {
		t.Errorf("table:\n%s", b.String())
	}
	// A report written before the within-seed intervals existed: the
	// verdict stands, the stricter check is n/a; a setup missing from a
	// run agrees on nothing.
	old := report.Report{Name: "t", Stats: []stats.Stats{
		{Setup: "steady", Load: 0.8, Seeds: []uint64{1}, TTFT: [3]stats.Estimate{{}, {Value: 100, Lo: 90, Hi: 110}, {}}},
	}}
	bold, _ := json.Marshal(old)
	_ = os.WriteFile(filepath.Join(dir, "old.json"), bold, 0o600)
	as, err = Agree([]string{paths[0], filepath.Join(dir, "old.json")})
	if err != nil || len(as) != 2 || !as[0].Agree || as[0].WithinKnown || as[1].Agree || as[1].WithinAgree {
		t.Errorf("with an old report: %+v %v", as, err)
	}
	b.Reset()
	PrintAgreement(&b, as)
	if !strings.Contains(b.String(), "| yes | n/a |") || !strings.Contains(b.String(), "1 of 2 overlap; 0 of 1 on the intervals") {
		t.Errorf("table with an old report:\n%s", b.String())
	}
	other := report.Report{Name: "other"}
	bo, _ := json.Marshal(other)
	_ = os.WriteFile(filepath.Join(dir, "o.json"), bo, 0o600)
	if _, err := Agree([]string{paths[0], filepath.Join(dir, "o.json")}); err == nil {
		t.Error("reports of two comparisons agreed")
	}
}
