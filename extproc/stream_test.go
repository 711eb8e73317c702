package extproc

import (
	"strings"
	"testing"
	"time"
)

const (
	evA     = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	evNull  = "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":null}\n\n"
	evB     = "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
	evUsage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
	evDone  = "data: [DONE]\n\n"
)

// TestUsageStripper: whatever the chunking, the client receives the stream
// it would have received had the router not asked for usage.
func TestUsageStripper(t *testing.T) {
	upstream := evA + evNull + evUsage + evDone
	want := evA + evB + evDone
	for _, size := range []int{1, 3, 7, 16, 40, len(upstream)} {
		u := &usageStripper{}
		var got strings.Builder
		for i := 0; i < len(upstream); i += size {
			end := min(i+size, len(upstream))
			got.Write(u.filter([]byte(upstream[i:end]), end == len(upstream)))
		}
		if got.String() != want {
			t.Fatalf("chunks of %d: got %q, want %q", size, got.String(), want)
		}
	}
}

func TestUsageStripperHoldsOnlyTheIncompleteEvent(t *testing.T) {
	u := &usageStripper{}
	out := u.filter([]byte(evA+"data: {\"cho"), false)
	if string(out) != evA {
		t.Fatalf("complete events must pass at once: %q", out)
	}
	if out := u.filter([]byte("ices\":[]}\n\n"), false); string(out) != "data: {\"choices\":[]}\n\n" {
		t.Fatalf("the held event, completed: %q", out)
	}
}

func TestStreamObserver(t *testing.T) {
	t0 := time.Unix(0, 0)
	o := newStreamObserver(t0)
	o.observe([]byte(evA), t0.Add(100*time.Millisecond))
	o.observe([]byte(evB[:10]), t0.Add(150*time.Millisecond))
	o.observe([]byte(evB[10:]+evUsage+evDone), t0.Add(300*time.Millisecond))
	ttft, tps, tokens := o.result()
	if ttft != 100*time.Millisecond || tokens != 2 || !o.done {
		t.Fatalf("ttft %v tokens %d done %v", ttft, tokens, o.done)
	}
	if tps < 4.9 || tps > 5.1 { // 1 token after the first in 200 ms
		t.Fatalf("tokens/s %v", tps)
	}
	// Without usage, deltas are counted; llama.cpp's native events count too.
	o = newStreamObserver(t0)
	o.observe([]byte("data: {\"content\":\"x\",\"stop\":false}\n\ndata: {\"content\":\"y\",\"stop\":true}\n\n"), t0.Add(time.Second))
	if _, _, tokens := o.result(); tokens != 2 || !o.done {
		t.Fatalf("llama.cpp stream: %d tokens, done %v", tokens, o.done)
	}
}
