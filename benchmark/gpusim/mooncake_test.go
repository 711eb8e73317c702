package gpusim

import (
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring/prefix"
)

const mooncakeTrace = "../traces/mooncake-conversation.jsonl"

func TestMooncakeText(t *testing.T) {
	a := MooncakeRow{InputLength: 1100, HashIDs: []int64{7, 8, 9}}
	b := MooncakeRow{InputLength: 700, HashIDs: []int64{7, 5}}
	pa, pb := a.Prompt(), b.Prompt()
	if len(pa) != 4400 || len(pb) != 2800 {
		t.Fatalf("lengths %d %d", len(pa), len(pb))
	}
	if pa[:2048] != pb[:2048] || pa[2048:2100] == pb[2048:2100] {
		t.Error("shared leading id must give shared text, and only that")
	}
	if strings.Trim(pa, "abcdefghijklmnopqrstuvwxyz ") != "" {
		t.Error("text must be lowercase letters and spaces only")
	}
	if string(AppendMooncakeBlockText(nil, 7)) != pa[:2048] {
		t.Error("block text not deterministic")
	}
	for _, r := range []MooncakeRow{a, b, {InputLength: 3, HashIDs: nil}, {InputLength: 5000, HashIDs: []int64{1}}} {
		want := ChatBlockHashes(r.Prompt())
		got := r.BlockHashes()
		if len(got) != len(want) || match(got, want) != len(want) {
			t.Errorf("row %+v: streamed hashes differ from hashing the prompt", r)
		}
	}
	// Rows sharing one 512-token id share the 32 blocks that end in its
	// text; the 33rd straddles the next id (`"user""` shifts them 7 bytes).
	if m := match(a.BlockHashes(), b.BlockHashes()); m != 32 {
		t.Errorf("shared blocks %d, want 32", m)
	}
}

func TestMooncakeReadErrors(t *testing.T) {
	for _, in := range []string{"", `{"timestamp":0,"input_length":0,"output_length":1,"hash_ids":[]}`, `{"input_length":5}`, `nope`} {
		if _, err := ReadMooncake(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	rows, err := ReadMooncake(strings.NewReader("{\"timestamp\": 1500, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [3]}\n\n"))
	if err != nil || len(rows) != 1 || rows[0].Timestamp != 1500*time.Millisecond || rows[0].SimRequest().OutputTokens != 1 {
		t.Fatalf("%+v %v", rows, err)
	}
}

// TestMooncakeCeiling is the done-when check of the cache model: fed every
// prompt of the Mooncake conversation trace in order, an unbounded cache
// hits within 2 points of the trace's published ceiling (36.6 % of its
// 512-token blocks are reuses). The prompts are hashed from their real
// text, exactly as the server would hash the chat bodies.
func TestMooncakeCeiling(t *testing.T) {
	rows, err := LoadMooncake(mooncakeTrace)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c := NewPrefixCache(0)
	for _, r := range rows {
		c.Access(r.BlockHashes(), r.InputLength)
	}
	rate := c.HitRate() * 100
	t.Logf("%d requests, token hit rate %.2f %% (ceiling 36.6 %%), %d blocks cached, in %v", len(rows), rate, c.Len(), time.Since(start))
	if rate < 34.6 || rate > 38.6 {
		t.Errorf("hit rate %.2f %%, want 36.6 ± 2", rate)
	}
}

// match is prefix.Match, for the tests.
func match(a, b []uint64) int { return prefix.Match(a, b) }

// TestMooncakeReplay replays the start of the trace on a calibrated GPU:
// the engine's hits are those of the cache model, less what timing denies
// (a block is shared only once computed), and never more, request by
// request.
func TestMooncakeReplay(t *testing.T) {
	rows, err := LoadMooncake(mooncakeTrace)
	if err != nil {
		t.Fatal(err)
	}
	rows = rows[:150]
	reqs := make([]SimRequest, len(rows))
	model := NewPrefixCache(0)
	want := make([]int, len(rows))
	for i, r := range rows {
		reqs[i] = r.SimRequest()
		want[i] = model.Access(reqs[i].Blocks, reqs[i].PromptTokens)
	}
	cfg := simConfig(func(c *Config) { c.Profile = "a100-llama3-8b" })
	res, st, err := Simulate(cfg, Rescale(reqs, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for i, r := range res {
		if r.CachedTokens > want[i] {
			t.Errorf("request %d: engine hit %d tokens, more than the unbounded model's %d", i, r.CachedTokens, want[i])
		}
		got += r.CachedTokens
	}
	t.Logf("engine hit %d tokens, model %d, of %d queried", got, model.Hits(), st.PrefixCacheQueries)
	if got == 0 || uint64(got) != st.PrefixCacheHits || st.PrefixCacheQueries != model.Queries() {
		t.Errorf("engine %d hits (state %d), model %d; queries %d vs %d", got, st.PrefixCacheHits, model.Hits(), st.PrefixCacheQueries, model.Queries())
	}
}
