package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/test/stack"
)

// TestRestartedWorkerLosesItsPrefixes: a gpusim worker (vLLM metrics)
// behind Envoy, the prefix term on. A long prompt fills its prefix index,
// and the index is bounded by the cache size the engine reports. The
// worker process restarts on the same address within a second (too fast
// for any health check to notice): the monitor sees the new process start
// time and empties the index, while the worker stays healthy.
func TestRestartedWorkerLosesItsPrefixes(t *testing.T) {
	args := []string{"--ttft-ms", "0", "--tokens-per-second", "0"}
	e := newEnv(t, []workerSpec{{ID: "w", Model: "m", Cap: 4, Args: args}}, func(c *config.Config) {
		c.Scoring.Weights.Prefix = 1
		c.Telemetry.ScrapeInterval = config.Duration(200 * time.Millisecond)
		c.Telemetry.ScrapeTimeout = config.Duration(150 * time.Millisecond)
	})
	worker := func() state.Worker {
		t.Helper()
		if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range e.Router.Scheduler().Snapshot().Workers {
			if w.Spec.ID == "w" {
				return w
			}
		}
		t.Fatal("no worker w")
		return state.Worker{}
	}
	body := `{"model":"m","messages":[{"role":"user","content":"` + filler("restart", 4000) + `"}],"max_tokens":2}`
	if resp, b := e.post("/v1/chat/completions", body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	wantKV := engineKVBlocks(t, e.Workers["w"].Addr)
	var w state.Worker
	err := stack.WaitFor(e.ctx, 5*time.Second, func() error {
		w = worker()
		if w.PrefixBlocks == 0 || w.Telemetry.StartTime.At.IsZero() || w.Telemetry.KVBlocks.Value != float64(wantKV) {
			return fmt.Errorf("index %d blocks, start %v, kv blocks %v (engine: %d)", w.PrefixBlocks, w.Telemetry.StartTime, w.Telemetry.KVBlocks, wantKV)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	started := w.Telemetry.StartTime.Value

	e.Workers["w"].Stop(2 * time.Second)
	g, err := stack.StartGpusim(e.ctx, bins["gpusim"], append([]string{"--listen", e.Workers["w"].Addr, "--id", "w", "--model", "m"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.Workers["w"] = g
	err = stack.WaitFor(e.ctx, 5*time.Second, func() error {
		w = worker()
		if w.Telemetry.StartTime.Value == started {
			return fmt.Errorf("start time not rescraped yet")
		}
		if w.PrefixBlocks != 0 {
			return fmt.Errorf("restarted worker's index still holds %d blocks", w.PrefixBlocks)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w.Health != scoring.Healthy {
		t.Fatalf("worker %s after a quick restart: the index went by the health path, not the restart check", w.Health)
	}
}

// engineKVBlocks reads gpusim's vllm:cache_config_info: its KV cache in
// 16-token blocks.
func engineKVBlocks(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`vllm:cache_config_info\{block_size="16",num_gpu_blocks="(\d+)"\}`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no cache_config_info in gpusim's metrics:\n%s", b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
