package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/test/stack"
)

// loraFleet starts three gpusim workers of base model "base" with LoRA
// slots: w0 serves adapter sql from the start, w1 chat, w2 none; the
// catalog adds math, which any of them can load. Three router replicas
// share Redis, each behind its own real Envoy, with lora.manage on.
func loraFleet(t *testing.T) []*env {
	t.Helper()
	lora := func(modules ...string) []string {
		args := []string{"--max-loras", "2", "--lora-load-ms", "200"}
		for _, m := range modules {
			args = append(args, "--lora-modules", m+"=/lora/"+m)
		}
		return args
	}
	base := startWorkers(t, []workerSpec{
		{ID: "w0", Model: "base", Cap: -1, Args: lora("sql")},
		{ID: "w1", Model: "base", Cap: -1, Args: lora("chat")},
		{ID: "w2", Model: "base", Cap: -1, Args: lora()},
	})
	rd := startRedis(t)
	base.Cfg.Strategy = scoring.Predicted
	base.Cfg.Redis.URL = "redis://" + rd.Addr + "/0"
	base.Cfg.Redis.KeyPrefix = fmt.Sprintf("lora%d", prefixSeq.Add(1))
	base.Cfg.Telemetry.ScrapeInterval = config.Duration(100 * time.Millisecond)
	base.Cfg.Telemetry.ScrapeTimeout = config.Duration(90 * time.Millisecond)
	base.Cfg.LoRA.Manage = true
	base.Cfg.LoRA.Adapters = []config.LoRAAdapter{{Name: "math", Base: "base", Path: "/lora/math"}}
	for i, a := range [][]string{{"sql"}, {"chat"}, nil} {
		base.Cfg.Workers[i].Adapters = a
		base.Cfg.Workers[i].MaxLoras = 2
	}
	var out []*env
	for i := range 3 {
		r := base.replica(fmt.Sprintf("replica-%d", i))
		r.startFront()
		out = append(out, r)
	}
	return out
}

func loraChat(model string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`, model)
}

// loads counts the adapter loads each gpusim logged for adapter.
func loads(e *env, adapter string) map[string]int {
	out := map[string]int{}
	for id, g := range e.Workers {
		for _, line := range strings.Split(g.Log(), "\n") {
			if strings.Contains(line, "lora adapter loaded") && strings.Contains(line, adapter) {
				out[id]++
			}
		}
	}
	return out
}

// TestLoRAAdapterPlacementAcrossReplicas: through real Envoys in front of
// three replicas sharing Redis, a request for a loaded adapter lands
// where it is loaded; simultaneous requests for one no worker holds make
// exactly one load, on one worker, which they all use; when the engine
// drops the adapter the next scrape notices it and the next request loads
// it again; an adapter nobody serves is a 404 naming it; /v1/models lists
// the adapters with their parent.
func TestLoRAAdapterPlacementAcrossReplicas(t *testing.T) {
	fleet := loraFleet(t)
	// Wait until every replica sees the engines' reports.
	err := stack.WaitFor(fleet[0].ctx, 10*time.Second, func() error {
		for _, e := range fleet {
			if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
				return err
			}
			for _, w := range e.Router.Scheduler().Snapshot().Workers {
				if !w.Telemetry.Adapters.Known() {
					return fmt.Errorf("%s: %s's adapters not reported yet", e.Cfg.ReplicaID, w.Spec.ID)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for i, tc := range []struct{ model, want string }{{"sql", "w0"}, {"chat", "w1"}, {"sql", "w0"}, {"chat", "w1"}} {
		e := fleet[i%3]
		resp, body := e.post("/v1/chat/completions", loraChat(tc.model), nil)
		if resp.StatusCode != 200 || resp.Header.Get("x-routed-node") != tc.want {
			t.Fatalf("%s via %s: status %d on %q; want 200 on %s: %s", tc.model, e.Cfg.ReplicaID, resp.StatusCode, resp.Header.Get("x-routed-node"), tc.want, body)
		}
	}

	// math: on no worker yet. Nine at once over the three replicas.
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := map[string]int{}
	for i := range 9 {
		wg.Add(1)
		go func(e *env) {
			defer wg.Done()
			resp, body := e.post("/v1/chat/completions", loraChat("math"), nil)
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != 200 {
				t.Errorf("math via %s: status %d: %s", e.Cfg.ReplicaID, resp.StatusCode, body)
				return
			}
			served[resp.Header.Get("x-routed-node")]++
		}(fleet[i%3])
	}
	wg.Wait()
	got := loads(fleet[0], "math")
	total := 0
	for _, n := range got {
		total += n
	}
	t.Logf("math loaded %v, served by %v", got, served)
	if total != 1 || len(served) != 1 {
		t.Fatalf("math loaded %v, served by %v; want one load and every request where it was loaded", got, served)
	}
	for id := range served {
		if got[id] != 1 {
			t.Fatalf("math served by %s but loaded on %v", id, got)
		}
	}

	// The engine drops math (an operator unloads it): the next scrape
	// drops the placement, and the next request loads it again, once.
	var warm string
	for id := range served {
		warm = id
	}
	unload, err := http.Post("http://"+fleet[0].Workers[warm].Addr+"/v1/unload_lora_adapter", "application/json", strings.NewReader(`{"lora_name":"math"}`))
	if err != nil || unload.StatusCode != 200 {
		t.Fatalf("unload math on %s: %v %v", warm, err, unload)
	}
	_ = unload.Body.Close()
	err = stack.WaitFor(fleet[0].ctx, 5*time.Second, func() error {
		e := fleet[2]
		if err := e.Router.Scheduler().Refresh(e.ctx); err != nil {
			return err
		}
		for _, w := range e.Router.Scheduler().Snapshot().Workers {
			for _, p := range w.Adapters {
				if p.Name == "math" {
					return fmt.Errorf("%s still has math placed: %+v", w.Spec.ID, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := fleet[2].post("/v1/chat/completions", loraChat("math"), nil); resp.StatusCode != 200 {
		t.Fatalf("math after the engine dropped it: %d %s", resp.StatusCode, body)
	}
	again := 0
	for _, n := range loads(fleet[0], "math") {
		again += n
	}
	if again != 2 {
		t.Fatalf("math loaded %d times in all; want one more load after the engine dropped it", again)
	}

	resp, body := fleet[1].post("/v1/chat/completions", loraChat("nope-lora"), nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "model_not_found") || !strings.Contains(body, "nope-lora") {
		t.Fatalf("unknown adapter: %d %s; want 404 model_not_found naming it", resp.StatusCode, body)
	}

	req, _ := http.NewRequestWithContext(fleet[2].ctx, http.MethodGet, fleet[2].URL+"/v1/models", nil)
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	var list struct {
		Data []struct{ ID, Parent string } `json:"data"`
	}
	if err := json.NewDecoder(mresp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	parents := map[string]string{}
	for _, m := range list.Data {
		parents[m.ID] = m.Parent
	}
	for _, a := range []string{"sql", "chat", "math"} {
		if parents[a] != "base" {
			t.Fatalf("/v1/models %+v; want %s listed with parent base", list.Data, a)
		}
	}
	if p, ok := parents["base"]; !ok || p != "" {
		t.Fatalf("/v1/models %+v; want base listed without a parent", list.Data)
	}
	for _, e := range fleet {
		e.waitIdle(5 * time.Second)
	}
}
