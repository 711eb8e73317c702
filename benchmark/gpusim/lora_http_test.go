package gpusim

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLoRAHTTPLoadUnloadAndModels(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTFTMs, cfg.TokensPerSecond, cfg.LoRALoadMs = 0, 0, 1
	cfg.MaxLoras, cfg.LoRAModules, cfg.LoRAAvailable = 2, []string{"sql=/lora/sql"}, []string{"/lora/chat"}
	_, base := startServer(t, cfg)
	chat := func(model string) int {
		resp := post(t, base+"/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hello"}],"max_tokens":2}`)
		readAll(t, resp)
		return resp.StatusCode
	}
	if got := chat("sql"); got != 200 {
		t.Errorf("adapter from the start: %d", got)
	}
	if got := chat("chat"); got != 404 {
		t.Errorf("adapter not loaded yet: %d, want 404", got)
	}
	for _, tt := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/load_lora_adapter", `{"lora_name":"chat"}`, 400, `"message":"Both 'lora_name' and 'lora_path' must be provided.","type":"InvalidUserInput","param":null,"code":400`},
		{"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/lora/nope"}`, 404, `"type":"NotFoundError"`},
		{"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/lora/chat"}`, 200, "Success: LoRA adapter 'chat' added successfully."},
		{"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/lora/chat"}`, 400, "The lora adapter 'chat' has already been loaded."},
		{"/v1/unload_lora_adapter", `{"lora_name":"ghost"}`, 404, "The lora adapter 'ghost' cannot be found."},
	} {
		resp := post(t, base+tt.path, tt.body)
		body := string(readAll(t, resp))
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s: %d %s, want %d containing %s", tt.path, tt.body, resp.StatusCode, body, tt.status, tt.want)
		}
	}
	if got := chat("chat"); got != 200 {
		t.Errorf("adapter loaded at run time: %d", got)
	}

	_, _, b := get(t, base+"/v1/models")
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	type card struct{ id, root, parent string }
	var got []card
	for _, d := range list.Data {
		c := card{d.ID, d.Root, "null"}
		if d.Parent != nil {
			c.parent = *d.Parent
		}
		got = append(got, c)
	}
	want := []card{{"m", "m", "null"}, {"sql", "/lora/sql", "m"}, {"chat", "/lora/chat", "m"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("models %v, want %v", got, want)
	}

	if st := adminState(t, base).LoRA; st == nil || st.Loads != 2 || st.MaxLoras != 2 {
		t.Errorf("lora state %+v, want 2 loads of 2 slots", st)
	}
	_, _, metrics := get(t, base+"/metrics")
	if !strings.Contains(string(metrics), `vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""}`) {
		t.Errorf("no idle lora_requests_info in\n%s", metrics)
	}

	resp := post(t, base+"/v1/unload_lora_adapter", `{"lora_name":"chat"}`)
	if body := string(readAll(t, resp)); resp.StatusCode != 200 || body != "Success: LoRA adapter 'chat' removed successfully." {
		t.Errorf("unload: %d %s", resp.StatusCode, body)
	}
	if got := chat("chat"); got != 404 {
		t.Errorf("unloaded adapter: %d, want 404", got)
	}
}

func TestLoRAEndpointsNeedLoRA(t *testing.T) {
	_, base := startServer(t, DefaultConfig())
	resp := post(t, base+"/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"/x"}`)
	readAll(t, resp)
	if resp.StatusCode != 404 && resp.StatusCode != 405 {
		t.Errorf("load without LoRA: %d, want no such endpoint", resp.StatusCode)
	}
}
