package scoring

import "testing"

// The engine's confirmed share of predicted hits scales the match the
// prefix term counts, is shown as prefix_trust, and comes from the worker.
func TestPrefixTrust(t *testing.T) {
	p := Prompt{PromptTokens: 160, Blocks: make([]uint64, 10)}
	live := Live{Match: 8}
	for _, tc := range []struct {
		trust, miss float64
		shown       bool
	}{{0, 0.2, false}, {1, 0.2, false}, {0.5, 0.6, true}, {0.25, 0.8, true}} {
		c := Candidate{LiveWeights: LiveWeights{Trust: tc.trust}}
		c.AddLive(LiveTerm{Name: "prefix_miss", Weight: 10, Miss: 1})
		var miss float64
		shown := false
		for _, term := range appendLiveTerms(nil, c, p, live) {
			switch term.Name {
			case "prefix_miss":
				miss = term.Value
			case "prefix_trust":
				shown = term.Value == tc.trust && term.Weight == 0
			}
		}
		if !near(miss, tc.miss) || shown != tc.shown {
			t.Fatalf("trust %v: prefix_miss %v (want %v), prefix_trust shown %v (want %v)", tc.trust, miss, tc.miss, shown, tc.shown)
		}
		if got := LiveScore(c.LiveWeights, p, live); !near(got, 10*tc.miss) {
			t.Fatalf("trust %v: score %v, want %v", tc.trust, got, 10*tc.miss)
		}
	}
	pa := params()
	pa.Weights.Prefix = 3
	s, _ := New(Scored, pa)
	w := worker("a", func(w *Worker) { w.KVBlocks, w.PrefixTrust = 1000, 0.4 })
	if got := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{w}}).Candidates[0].LiveWeights.Trust; got != 0.4 {
		t.Fatalf("candidate's trust %v, want the worker's 0.4", got)
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }
