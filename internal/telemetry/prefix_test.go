package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

// vLLM's exposition of its prefix cache, cache configuration and process
// start, as vLLM 0.8+ writes them (hits per model, in tokens).
const vllmCache = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 1200
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 5000
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="2048",num_gpu_blocks="27000"} 1.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
`

func TestParseEngineCache(t *testing.T) {
	r, err := ParseMetrics(FormatVLLM, []byte(vllmCache))
	if err != nil {
		t.Fatal(err)
	}
	if r.PrefixHits == nil || *r.PrefixHits != 1200 {
		t.Fatalf("prefix hits %v, want 1200", r.PrefixHits)
	}
	if r.KVBlocks == nil || *r.KVBlocks != 54000 { // 27,000 blocks of 32 tokens = 54,000 of 16
		t.Fatalf("kv blocks %v, want 54000 of 16 tokens", r.KVBlocks)
	}
	if r.StartTime == nil || *r.StartTime != 1.7e9 {
		t.Fatalf("start time %v", r.StartTime)
	}
	legacy := "# TYPE vllm:gpu_prefix_cache_hits_total counter\nvllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 7\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
	if r, err := ParseMetrics(FormatVLLM, []byte(legacy)); err != nil || r.PrefixHits == nil || *r.PrefixHits != 7 || r.KVBlocks != nil {
		t.Fatalf("older name: %+v %v", r, err)
	}
	if r, err := ParseMetrics(FormatSGLang, []byte(sglang)); err != nil || r.PrefixHits != nil || r.StartTime != nil {
		t.Fatalf("SGLang has no hit counter here: %+v %v", r, err)
	}
}

func sample(v float64, at time.Time) state.Sample { return state.Sample{Value: v, At: at} }

func TestPrefixCheck(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	t1 := t0.Add(time.Second)
	// A worker whose window opened at 1,000 engine hits and 10,000
	// predicted ones.
	open := state.Worker{Telemetry: state.Telemetry{
		PrefixHits: sample(1000, t0), StartTime: sample(1.7e9, t0),
		HitMark: sample(1000, t0), PredictedMark: sample(10_000, t0),
	}}
	withRatio := open
	withRatio.Telemetry.HitRatio = sample(1, t0)
	tests := []struct {
		name      string
		prev      state.Worker
		predicted int64
		hits      float64
		start     float64
		restarted bool
		ratio     float64 // 0: none written
		marked    bool    // a new window opened
	}{
		{name: "first scrape opens a window", prev: state.Worker{}, predicted: 500, hits: 10, start: 1.7e9, marked: true},
		{name: "too few predicted hits: the window goes on", prev: open, predicted: 10_000 + hitWindowTokens - 1, hits: 1500, start: 1.7e9},
		{name: "the engine confirms a quarter", prev: open, predicted: 14_000, hits: 2000, start: 1.7e9, ratio: 0.25, marked: true},
		{name: "smoothed with the previous ratio", prev: withRatio, predicted: 14_000, hits: 2000, start: 1.7e9, ratio: 0.625, marked: true},
		{name: "a ratio is bounded", prev: open, predicted: 12_048, hits: 100_000, start: 1.7e9, ratio: maxHitRatio, marked: true},
		{name: "a new start time is a restart", prev: open, predicted: 14_000, hits: 2000, start: 1.7e9 + 60, restarted: true, marked: true},
		{name: "a counter that went back is a restart", prev: open, predicted: 14_000, hits: 5, start: 0, restarted: true, marked: true},
		{name: "a predicted count that went back opens a window", prev: open, predicted: 100, hits: 1500, start: 1.7e9, marked: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev := tc.prev
			prev.PredictedHitTokens = tc.predicted
			tm := state.Telemetry{PrefixHits: sample(tc.hits, t1)}
			if tc.start != 0 {
				tm.StartTime = sample(tc.start, t1)
			}
			if got := prefixCheck(prev, &tm, t1); got != tc.restarted {
				t.Fatalf("restarted %v, want %v", got, tc.restarted)
			}
			if tc.ratio == 0 && !tm.HitRatio.At.IsZero() {
				t.Fatalf("ratio %v written, want none", tm.HitRatio)
			}
			if tc.ratio != 0 && (tm.HitRatio.At != t1 || tm.HitRatio.Value != tc.ratio) {
				t.Fatalf("ratio %+v, want %v", tm.HitRatio, tc.ratio)
			}
			if marked := !tm.HitMark.At.IsZero(); marked != tc.marked {
				t.Fatalf("window opened %v, want %v", marked, tc.marked)
			}
			if tc.marked && (tm.HitMark.Value != tc.hits || tm.PredictedMark.Value != float64(tc.predicted)) {
				t.Fatalf("marks %v %v, want %v %v", tm.HitMark.Value, tm.PredictedMark.Value, tc.hits, tc.predicted)
			}
		})
	}
}

// snapshotOf serves the store's own snapshot as the monitor's worker list.
type snapshotOf struct{ s *memory.Store }

func (w snapshotOf) Snapshot() state.Snapshot {
	snap, _ := w.s.Snapshot(context.Background())
	return snap
}

// TestRestartedEngineLosesItsIndex: a real monitor cycle against an
// engine's /metrics: the scraped cache size and hit ratio reach the
// store; when the engine's start time moves, its prefix index is emptied
// (and only its).
func TestRestartedEngineLosesItsIndex(t *testing.T) {
	ctx := context.Background()
	var start, hits atomic.Int64
	start.Store(1_700_000_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"+
			"# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{model_name=\"m\"} %d\n"+
			"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"512\"} 1\n"+
			"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %d\n", hits.Load(), start.Load())
	}))
	defer srv.Close()
	store := memory.New(nil, state.Limits{})
	addr := srv.Listener.Addr().String()
	if err := store.Register(ctx, []state.WorkerSpec{
		{ID: "engine", Address: addr, Models: []string{"m"}, MaxConcurrency: 8},
		{ID: "other", Address: addr, Models: []string{"m"}, MaxConcurrency: 8, MetricsFormat: "none"},
	}); err != nil {
		t.Fatal(err)
	}
	blocks := make([]uint64, 64)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	claim := func(worker string) int {
		id := fmt.Sprintf("c-%d", time.Now().UnixNano())
		res, err := store.Claim(ctx, state.ClaimRequest{
			ID: id, Candidates: []state.Candidate{{Worker: worker, Cap: 8, LiveWeights: scoring.LiveWeights{Miss: 1}}},
			Prompt: scoring.Prompt{Blocks: blocks, PromptTokens: 64 * 16},
		})
		if err != nil || res.Index != 0 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		if _, err := store.Release(ctx, state.Release{ID: id}); err != nil {
			t.Fatal(err)
		}
		return res.Live[0].Match
	}
	m := NewMonitor(store, snapshotOf{store}, Options{Replica: "r", ScrapeInterval: time.Second, HealthInterval: time.Hour})
	m.Cycle(ctx) // opens the window
	claim("engine")
	claim("other")
	for range 3 { // 3 × 1,023 predicted hit tokens: a window's worth
		claim("engine")
	}
	hits.Add(1023) // the engine confirms a third
	m.Cycle(ctx)
	w := worker(t, store, "engine")
	if w.Telemetry.KVBlocks.Value != 512 {
		t.Fatalf("scraped kv blocks %v, want 512", w.Telemetry.KVBlocks)
	}
	if r := w.Telemetry.HitRatio.Value; r < 0.33 || r > 0.34 {
		t.Fatalf("hit ratio %v, want 1023/3069", w.Telemetry.HitRatio)
	}
	if claim("engine") == 0 || claim("other") == 0 {
		t.Fatal("no match before the restart")
	}
	start.Add(30)
	hits.Store(0)
	m.Cycle(ctx)
	if got := claim("engine"); got != 0 {
		t.Fatalf("the restarted engine's index matched %d blocks", got)
	}
	if got := claim("other"); got == 0 {
		t.Fatal("the other worker's index went too")
	}
}

func worker(t *testing.T, s *memory.Store, id string) state.Worker {
	t.Helper()
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Spec.ID == id {
			return w
		}
	}
	t.Fatalf("no worker %s", id)
	return state.Worker{}
}
