package extproc

import (
	"errors"
	"strings"
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestTenantOf(t *testing.T) {
	key := Identity{Tenant: "team-a", MaxPriority: state.PriorityStandard, FairnessIDs: []string{"app-1", "app-2"}}
	bare := Identity{Tenant: "team-b", MaxPriority: state.PriorityStandard}
	ours := func(v string) fairnessHeader { return fairnessHeader{headerFairnessID, v} }
	tests := []struct {
		name                string
		h                   fairnessHeader
		id                  Identity
		want                string
		ignored, unverified bool
		bad                 bool
	}{
		{"key, no header", fairnessHeader{}, key, "team-a", false, false, false},
		{"allowed id", ours("app-2"), key, "app-2", false, false, false},
		{"llm-d's header", fairnessHeader{headerFairnessIDLLMD, "app-1"}, key, "app-1", false, false, false},
		{"id the key does not allow", ours("team-c"), key, "team-a", true, false, false},
		{"key with no ids", ours("app-1"), bare, "team-b", true, false, false},
		{"keys off, no header", fairnessHeader{}, Anonymous, state.DefaultTenant, false, false, false},
		{"keys off, header", ours("app-9"), Anonymous, "app-9", false, true, false},
		{"spaces trimmed", ours(" app-1 "), key, "app-1", false, false, false},
		{"empty", ours(""), key, "", false, false, true},
		{"over-long", ours(strings.Repeat("a", state.MaxTenantLen+1)), Anonymous, "", false, false, true},
		{"malformed", ours("a/b"), key, "", false, false, true},
		{"leading dash", ours("-a"), Anonymous, "", false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored, unverified, err := tenantOf(tc.h, tc.id)
			if tc.bad {
				var pe *paramError
				if !errors.Is(err, ErrBadFairnessID) || !errors.As(err, &pe) || pe.Param != tc.h.name {
					t.Fatalf("want an ErrBadFairnessID naming %s, got %v", tc.h.name, err)
				}
				if e := classify(err); e.Status != 400 || e.Code != "invalid_fairness_id" || e.Param != tc.h.name {
					t.Fatalf("classified as %+v", e)
				}
				return
			}
			if err != nil || got != tc.want || ignored != tc.ignored || unverified != tc.unverified {
				t.Fatalf("got %q ignored %v unverified %v err %v; want %q %v %v", got, ignored, unverified, err, tc.want, tc.ignored, tc.unverified)
			}
		})
	}
}

func TestFairnessHeaderPrefersOurs(t *testing.T) {
	var h fairnessHeader
	h.read(headerFairnessID, "ours")
	h.read(headerFairnessIDLLMD, "llmd")
	if h.value != "ours" {
		t.Fatalf("got %+v", h)
	}
	if h.read("x-other", "v") {
		t.Fatal("read an unrelated header")
	}
}

// FuzzTenantOf: any header value is a tenant name or a 400, never a
// panic, and never a tenant the key does not allow.
func FuzzTenantOf(f *testing.F) {
	for _, s := range []string{"", "app-1", "a/b", strings.Repeat("x", 70), "é", " app-2 "} {
		f.Add(s)
	}
	key := Identity{Tenant: "team-a", FairnessIDs: []string{"app-1"}}
	f.Fuzz(func(t *testing.T, v string) {
		got, _, _, err := tenantOf(fairnessHeader{headerFairnessID, v}, key)
		if err == nil && got != "team-a" && got != "app-1" {
			t.Fatalf("%q gave tenant %q", v, got)
		}
	})
}
