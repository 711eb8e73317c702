package lora

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestLoader(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		got = append(got, r.URL.Path+" "+body["lora_name"]+" "+body["lora_path"])
		switch body["lora_name"] {
		case "bad":
			http.Error(w, `{"message":"no adapter at /nowhere"}`, http.StatusBadRequest)
		case "dup":
			http.Error(w, `{"message":"The lora adapter 'dup' has already been loaded."}`, http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	l := &Loader{Client: srv.Client()}
	ctx := context.Background()
	if err := l.Load(ctx, addr, state.Adapter{Name: "sql", Path: "/lora/sql"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(ctx, addr, state.Adapter{Name: "dup", Path: "/lora/dup"}); err != nil {
		t.Fatalf("already loaded: %v; want success", err)
	}
	err := l.Load(ctx, addr, state.Adapter{Name: "bad", Path: "/nowhere"})
	if err == nil || !strings.Contains(err.Error(), "no adapter at /nowhere") {
		t.Fatalf("failed load: %v; want the engine's reason", err)
	}
	if err := l.Load(ctx, addr, state.Adapter{Name: "nopath"}); err == nil {
		t.Fatal("an adapter with no path loaded")
	}
	if err := l.Unload(ctx, addr, "sql"); err != nil {
		t.Fatal(err)
	}
	want := []string{"/v1/load_lora_adapter sql /lora/sql", "/v1/load_lora_adapter dup /lora/dup", "/v1/load_lora_adapter bad /nowhere", "/v1/unload_lora_adapter sql "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("calls %q; want %q", got, want)
	}
}
