package sim

import (
	"strings"
	"testing"
)

// Every repeat is counted once, every miss has one reason, and a group
// reaches at most every GPU; on one GPU a miss can only be the prefix
// still computed or evicted there.
func TestPrefixMissesAccount(t *testing.T) {
	s := smallStudy()
	sp := s.Workload.SharedPrefix
	for _, tc := range []struct {
		name   string
		gpus   int
		single bool
	}{{"fleet", 4, false}, {"one GPU", 1, true}} {
		st := s
		if tc.single {
			st.GPUs = []GPUClass{{Profile: "a100-llama3-8b", Count: 1}}
		}
		res := runOnce(t, st, "predicted", 2, 3)
		m := res.Misses
		if m == nil {
			t.Fatalf("%s: no prefix misses recorded", tc.name)
		}
		served := 0
		for _, q := range res.Requests {
			if q.Outcome == OutcomeOK {
				served++
			}
		}
		if want := sp.NumGroups * (sp.NumPromptsPerGroup - 1); m.Repeats != want {
			t.Errorf("%s: %d repeats, want %d", tc.name, m.Repeats, want)
		}
		sum := 0
		for reason, n := range m.ByReason {
			sum += n
			if tc.single && strings.HasPrefix(reason, "holder_") {
				t.Errorf("one GPU: reason %s", reason)
			}
		}
		if sum != m.Missed || m.Missed > m.Repeats {
			t.Errorf("%s: %d misses, %d by reason, %d repeats", tc.name, m.Missed, sum, m.Repeats)
		}
		if m.Groups != sp.NumGroups || m.GroupGPUs < m.Groups || m.GroupGPUs > tc.gpus*m.Groups {
			t.Errorf("%s: %d GPUs over %d groups", tc.name, m.GroupGPUs, m.Groups)
		}
		if tc.single && m.GroupGPUs != m.Groups {
			t.Errorf("one GPU: %d GPUs over %d groups", m.GroupGPUs, m.Groups)
		}
	}
}
