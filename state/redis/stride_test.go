package redis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestClaimScriptStride(t *testing.T) {
	if want := fmt.Sprintf("local STRIDE = %d\n", state.IndexStride); !strings.Contains(luaClaim, want) {
		t.Fatalf("claim.lua lacks %q", want)
	}
	if want := fmt.Sprintf("%d * redis.call('ZCARD'", state.IndexStride); !strings.Contains(luaSnapshot, want) {
		t.Fatalf("snapshot.lua lacks %q", want)
	}
}
