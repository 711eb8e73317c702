package gpusim

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

func instantConfig(mut func(*Config)) Config {
	c := DefaultConfig()
	c.TTFTMs, c.TokensPerSecond = 0, 0
	if mut != nil {
		mut(&c)
	}
	return c
}

const smallReq = `{"model":"m","prompt":"hi","max_tokens":2}`

func TestErrorRate(t *testing.T) {
	tests := []struct {
		rate     float64
		min, max int // 503s out of 200
	}{
		{0, 0, 0},
		{1, 200, 200},
		{0.5, 70, 130},
	}
	for _, tt := range tests {
		_, base := startServer(t, instantConfig(func(c *Config) { c.ErrorRate = tt.rate; c.Seed = 3 }))
		failed := 0
		for range 200 {
			resp := post(t, base+"/v1/completions", smallReq)
			body := string(readAll(t, resp))
			switch resp.StatusCode {
			case 503:
				failed++
				if !strings.Contains(body, `"type":"server_error"`) || !strings.Contains(body, `"code":"service_unavailable"`) {
					t.Fatalf("503 body %s", body)
				}
			case 200:
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		if failed < tt.min || failed > tt.max {
			t.Errorf("rate %v: %d/200 failed, want [%d, %d]", tt.rate, failed, tt.min, tt.max)
		}
		if st := adminState(t, base); st.ServedTotal != 200 || st.Completed != uint64(200-failed) {
			t.Errorf("rate %v: state %+v", tt.rate, st)
		}
	}
}

func TestAdminConfig(t *testing.T) {
	_, base := startServer(t, instantConfig(nil))
	_, _, b := get(t, base+"/admin/config")
	if string(b) != `{"slowdown":1,"error_rate":0,"ttft_ms":0,"tokens_per_second":0}`+"\n" {
		t.Errorf("initial config %s", b)
	}
	tests := []struct {
		body   string
		status int
		want   string
	}{
		{`{"error_rate":1}`, 200, `{"slowdown":1,"error_rate":1,"ttft_ms":0,"tokens_per_second":0}`},
		{`{"slowdown":10,"ttft_ms":100,"tokens_per_second":5}`, 200, `{"slowdown":10,"error_rate":1,"ttft_ms":100,"tokens_per_second":5}`},
		{`{"slowdown":0}`, 400, `slowdown out of range`},
		{`{"error_rate":1.5}`, 400, `error_rate out of range`},
		{`{"speed":2}`, 400, `unknown field`},
	}
	for _, tt := range tests {
		resp := post(t, base+"/admin/config", tt.body)
		body := string(readAll(t, resp))
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s, want %d %s", tt.body, resp.StatusCode, body, tt.status, tt.want)
		}
	}
	if resp := post(t, base+"/v1/completions", smallReq); resp.StatusCode != 503 {
		t.Errorf("error_rate 1 at run time: status %d", resp.StatusCode)
	}
}

func TestLoading(t *testing.T) {
	_, base := startServer(t, instantConfig(func(c *Config) { c.LoadingMs = 1000 }))
	code, _, body := get(t, base+"/health")
	if code != 503 || !strings.Contains(string(body), `"code":503,"message":"Loading model"`) {
		t.Fatalf("health while loading: %d %s", code, body)
	}
	resp := post(t, base+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if b := readAll(t, resp); resp.StatusCode != 503 || !strings.Contains(string(b), "Loading model") {
		t.Fatalf("inference while loading: %d %s", resp.StatusCode, b)
	}
	eventually(t, "loaded", func() bool {
		code, _, _ := get(t, base+"/health")
		return code == 200
	})
	_, _, body = get(t, base+"/health")
	if string(body) != `{"status":"ok"}`+"\n" {
		t.Errorf("health body %s", body)
	}
	if resp := post(t, base+"/v1/completions", smallReq); resp.StatusCode != 200 {
		t.Errorf("after loading: %d", resp.StatusCode)
	}
}

func TestSlotsAndDisconnect(t *testing.T) {
	cfg := instantConfig(func(c *Config) { c.Slots, c.CtxSize, c.MetricsFormat = 1, 2048, FormatLlamaCpp })
	_, base := startServer(t, cfg)
	_, _, b := get(t, base+"/props")
	if !strings.Contains(string(b), `"total_slots":1`) {
		t.Errorf("props %s", b)
	}
	// Make generation endless, then occupy the slot with a stream.
	readAll(t, post(t, base+"/admin/config", `{"tokens_per_second":0.001}`))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := open(ctx, base+"/completion", `{"prompt":"hello","n_predict":50,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // the first token
		t.Fatal(err)
	}
	var slots []struct {
		ID           int  `json:"id"`
		NCtx         int  `json:"n_ctx"`
		IsProcessing bool `json:"is_processing"`
	}
	_, _, b = get(t, base+"/slots")
	if err := json.Unmarshal(b, &slots); err != nil || len(slots) != 1 || !slots[0].IsProcessing || slots[0].NCtx != 2048 {
		t.Fatalf("slots %s (%v)", b, err)
	}
	// A second request is deferred until the first client leaves.
	var wg sync.WaitGroup
	wg.Add(1)
	var status int
	go func() {
		defer wg.Done()
		r, err := doPost(context.Background(), base+"/completion", `{"prompt":"x","n_predict":1}`)
		if err == nil {
			status = r.StatusCode
		}
	}()
	eventually(t, "one deferred", func() bool { return adminState(t, base).Waiting == 1 })
	if st := adminState(t, base); st.Waiting != 1 || st.Running != 1 {
		t.Fatalf("state before disconnect %+v", st)
	}
	cancel()
	resp.Body.Close()
	wg.Wait()
	if status != 200 {
		t.Errorf("deferred request: status %d", status)
	}
	if st := adminState(t, base); st.Running != 0 || st.KVUsedTokens != 0 || st.Completed != 1 {
		t.Errorf("after disconnect %+v", st)
	}
}

func TestSlowdownRetimesStepInFlight(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Profile = "h100-llama2-7b"
	_, base := startServer(t, cfg)
	readAll(t, post(t, base+"/admin/config", `{"slowdown":1e9}`))
	done := make(chan int, 1)
	go func() {
		r, err := doPost(context.Background(), base+"/v1/completions", smallReq)
		if err != nil {
			done <- 0
			return
		}
		done <- r.StatusCode
	}()
	eventually(t, "request running", func() bool { return adminState(t, base).Running == 1 })
	readAll(t, post(t, base+"/admin/config", `{"slowdown":1}`))
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("status %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("step in flight kept its old duration")
	}
}

func TestExitAfterDropsLaterRequests(t *testing.T) {
	srv, base := startServer(t, instantConfig(func(c *Config) { c.ExitAfter = 1 }))
	readAll(t, post(t, base+"/v1/completions", smallReq))
	select {
	case <-srv.Exited():
	default:
		t.Fatal("not exited after the first answer")
	}
	if resp, err := doPost(context.Background(), base+"/v1/completions", smallReq); err == nil {
		t.Errorf("request past exit-after answered: %d", resp.StatusCode)
	}
}
