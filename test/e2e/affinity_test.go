package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llm-router/llm-router/internal/config"
)

// conversation is a chat whose turns accumulate, as a client resends its
// history with every turn.
type conversation struct {
	messages []map[string]string
}

func (c *conversation) body(model, next string) string {
	msgs := append(append([]map[string]string{}, c.messages...), map[string]string{"role": "user", "content": next})
	b, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "max_tokens": 64})
	return string(b)
}

func (c *conversation) add(user, assistant string) {
	c.messages = append(c.messages, map[string]string{"role": "user", "content": user}, map[string]string{"role": "assistant", "content": assistant})
}

// filler is n bytes of text unique to tag, so its blocks match nothing else.
func filler(tag string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s-%d ", tag, i)
	}
	return b.String()[:n]
}

// TestConversationStaysOnItsWorkerUntilSaturated sends one multi-turn
// conversation through 3 router replicas sharing Redis: each turn lands
// on the worker that holds the earlier turns (the prefix index lives in
// the claim script, so every replica sees it), and once that worker's
// in-flight prefill would pass ttft_slo × prefill rate (3,000 tokens
// here), a turn with a long new part moves to another worker.
func TestConversationStaysOnItsWorkerUntilSaturated(t *testing.T) {
	rd := startRedis(t)
	f := newRouterFleet(t, 3, fakeWorkers(4, 64, "m"), rd.Addr, func(c *config.Config) {
		c.Scoring.Weights.Active = 10
		c.Scoring.Weights.Prefix = 1000
		c.Scoring.TTFTSLO = config.Duration(time.Second)
		c.Scoring.PrefillTokensPerSecond = 3000
	})
	ctx := context.Background()
	conv := &conversation{messages: []map[string]string{{"role": "system", "content": filler("system", 1200)}}}
	send := func(i int, text string) (*epRequest, string) {
		t.Helper()
		r, err := f.conns[i%3].start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w, status, err := r.decide(conv.body("m", text))
		if err != nil || status != 200 {
			t.Fatalf("turn %d: %v %d", i, err, status)
		}
		return r, w
	}

	// Turns released one by one: never saturated, never moved.
	var warm string
	for i := range 9 {
		text := filler(fmt.Sprintf("turn%d", i), 200)
		r, w := send(i, text)
		if warm == "" {
			warm = w
		}
		if w != warm {
			t.Fatalf("turn %d (replica %d) went to %s; the conversation is on %s", i, i%3, w, warm)
		}
		if err := r.respond(200); err != nil {
			t.Fatal(err)
		}
		conv.add(text, filler(fmt.Sprintf("reply%d", i), 100))
	}

	// Turns with a long new part (about 1,150 uncached tokens each: 1,000
	// of text, the rest the messages' JSON, which the estimate counts),
	// held in flight: two fit under 3,000 prefill tokens on the warm
	// worker, and so does a short turn after them (about 200); a third
	// long one would not, and moves.
	var held []*epRequest
	defer func() {
		for _, r := range held {
			_ = r.respond(200)
		}
	}()
	for i, size := range []int{4000, 4000, 200, 4000} {
		r, w := send(i, filler(fmt.Sprintf("new%d", i), size))
		held = append(held, r)
		switch {
		case i < 3 && w != warm:
			t.Fatalf("turn %d (%d bytes new) went to %s with the warm worker %s not saturated", i, size, w, warm)
		case i == 3 && w == warm:
			t.Fatalf("turn %d stayed on %s past its prefill limit", i, w)
		}
	}
}

// TestCommandsPerRequestWithAffinity: with the prefix and token-load terms
// on, the index lookup, the record and the token counts ride in the claim
// and the release: still two round trips per request.
func TestCommandsPerRequestWithAffinity(t *testing.T) {
	commandsPerRequest(t, func(c *config.Config) {
		c.Scoring.Weights.Prefix, c.Scoring.Weights.TokenLoad = 3, 2
	}, func(i int) string {
		conv := &conversation{messages: []map[string]string{{"role": "system", "content": filler(fmt.Sprintf("sys%d", i%8), 2048)}}}
		return conv.body("m", filler(fmt.Sprintf("q%d", i), 512))
	})
}
