package auth

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/extproc"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

func TestAuthenticate(t *testing.T) {
	k, err := New(config.Auth{Keys: []config.APIKey{
		{Key: "sk-team-a-123456", Tenant: "team-a", MaxPriority: "critical"},
		{Key: "sk-team-b-123456", Tenant: "team-b"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Enabled() {
		t.Fatal("keys configured: auth must be on")
	}
	tests := []struct {
		header string
		tenant string
		err    error
	}{
		{"Bearer sk-team-a-123456", "team-a", nil},
		{"bearer sk-team-b-123456", "team-b", nil},
		{"Bearer sk-team-a-12345", "", extproc.ErrUnauthenticated},
		{"sk-team-a-123456", "", extproc.ErrUnauthenticated},
		{"Basic sk-team-a-123456", "", extproc.ErrUnauthenticated},
		{"", "", extproc.ErrUnauthenticated},
	}
	for _, tc := range tests {
		id, err := k.Authenticate(tc.header)
		if !errors.Is(err, tc.err) || id.Tenant != tc.tenant {
			t.Errorf("Authenticate(%q) = %+v, %v; want tenant %q, %v", tc.header, id, err, tc.tenant, tc.err)
		}
	}
}

func TestDisabledIsExplicitOrLoud(t *testing.T) {
	off := false
	k, _ := New(config.Auth{Enabled: &off, Keys: []config.APIKey{{Key: "sk-12345678", Tenant: "x"}}})
	if k.Enabled() {
		t.Fatal("enabled: false must switch auth off")
	}
	none, _ := New(config.Auth{})
	if none.Enabled() || none.Count() != 0 {
		t.Fatal("no keys: auth off (reported by the caller)")
	}
	if id, err := none.Authenticate(""); err != nil || !reflect.DeepEqual(id, extproc.Anonymous) {
		t.Fatalf("auth off: %+v %v", id, err)
	}
	tok, _ := New(config.Auth{Token: "single-token"})
	if id, err := tok.Authenticate("Bearer single-token"); err != nil || id.MaxPriority != state.PriorityCritical || id.MinTTFT != time.Millisecond || id.MinTPOT != time.Millisecond {
		t.Fatalf("AUTH_TOKEN: %+v %v", id, err)
	}
}

func TestKeysFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys.yaml")
	_ = os.WriteFile(good, []byte("- {key: sk-file-1234, tenant: f, max_priority: batch, min_ttft_slo: 250ms, min_tpot_slo: 0.01}\n"), 0o600)
	k, err := New(config.Auth{KeysFile: good})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := k.Authenticate("Bearer sk-file-1234"); err != nil || id.MaxPriority != state.PriorityBatch || id.MinTTFT != 250*time.Millisecond || id.MinTPOT != 10*time.Millisecond {
		t.Fatalf("%+v %v", id, err)
	}
	absurd := filepath.Join(dir, "absurd.yaml")
	_ = os.WriteFile(absurd, []byte("- {key: sk-file-1234, tenant: f, min_tpot_slo: 2h}\n"), 0o600)
	if _, err := New(config.Auth{KeysFile: absurd}); err == nil || !strings.Contains(err.Error(), "min_tpot_slo") {
		t.Fatalf("a key's absurd bound: %v", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	_ = os.WriteFile(empty, []byte("[]\n"), 0o600)
	if _, err := New(config.Auth{KeysFile: empty}); err == nil {
		t.Fatal("an empty keys file must be an error, not auth silently off")
	}
}
