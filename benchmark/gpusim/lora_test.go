package gpusim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// loraStepper is a calibrated engine serving adapters a, b and c of model m
// with max slots.
func loraStepper(t *testing.T, slots int, loadMs float64) *Stepper {
	t.Helper()
	st, err := NewStepper(simConfig(func(c *Config) {
		c.Profile = "a100-llama3-8b"
		c.MaxLoras, c.LoRAModules, c.LoRALoadMs = slots, []string{"a=/lora/a", "b", "c"}, loadMs
	}))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// loraRun submits each job at its time and steps the engine until all are
// done, checking the engine's invariants after every step; it returns each
// tag's first-token and done times.
type loraJob struct {
	model  string
	at     time.Duration
	output int
	blocks []uint64
}

type loraOutcome struct {
	first, done time.Duration
	cached      int
}

func loraRun(t *testing.T, st *Stepper, jobs []loraJob) []loraOutcome {
	t.Helper()
	out := make([]loraOutcome, len(jobs))
	left, next := len(jobs), 0
	var now time.Duration
	for left > 0 {
		for next < len(jobs) && jobs[next].at <= now {
			j := jobs[next]
			if err := st.SubmitModel(next, j.model, SimRequest{PromptTokens: 100, OutputTokens: j.output, Blocks: j.blocks}, now); err != nil {
				t.Fatal(err)
			}
			next++
		}
		at, ok := st.Plan(now)
		if !ok {
			if next == len(jobs) {
				t.Fatalf("stalled at %v with %d left", now, left)
			}
			now = jobs[next].at
			continue
		}
		for _, p := range st.Advance(at) {
			if p.First {
				out[p.Tag].first, out[p.Tag].cached = p.At, p.CachedTokens
			}
			if p.Done {
				out[p.Tag].done = p.At
				left--
			}
		}
		if err := st.e.checkInvariants(); err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
		now = at
	}
	return out
}

func TestLoRAWaitsForASlotWithoutBlockingOthers(t *testing.T) {
	st := loraStepper(t, 1, 100)
	out := loraRun(t, st, []loraJob{
		{model: "a", output: 40},
		{model: "b", output: 1},
		{model: "m", output: 1}, // the base model needs no slot
	})
	if out[1].first < out[0].done {
		t.Errorf("b started at %v, before a (holding the only slot) finished at %v", out[1].first, out[0].done)
	}
	if out[2].first >= out[0].done {
		t.Errorf("the base model's request waited behind b: first token %v, a done %v", out[2].first, out[0].done)
	}
	if l := st.State().LoRA; l.Loads != 2 || !slices.Equal(l.Resident, []string{"b"}) {
		t.Errorf("loads %d resident %v, want 2 and [b]", l.Loads, l.Resident)
	}
}

func TestLoRAEvictsTheLeastRecentlyUsedIdleAdapter(t *testing.T) {
	st := loraStepper(t, 2, 100)
	sec := time.Second
	loraRun(t, st, []loraJob{
		{model: "a", output: 2},
		{model: "b", at: sec, output: 2},
		{model: "c", at: 2 * sec, output: 2}, // evicts a, the LRU
		{model: "b", at: 3 * sec, output: 2}, // resident: no load
		{model: "a", at: 4 * sec, output: 2}, // evicts c
	})
	l := st.State().LoRA
	if l.Loads != 4 || !slices.Equal(l.Resident, []string{"b", "a"}) {
		t.Errorf("loads %d resident %v, want 4 and [b a]", l.Loads, l.Resident)
	}
}

func TestLoRANeverEvictsAnAdapterWithRunningRequests(t *testing.T) {
	st := loraStepper(t, 2, 100)
	// a runs long; b comes and goes, then c must take b's slot, not a's,
	// and a second request of a joins the first at once.
	out := loraRun(t, st, []loraJob{
		{model: "a", output: 1000},
		{model: "b", at: time.Millisecond, output: 2},
		{model: "c", at: time.Second, output: 2},
		{model: "a", at: 2 * time.Second, output: 2},
	})
	if out[0].done < 2*time.Second {
		t.Fatalf("the long request ended at %v: too short to test anything", out[0].done)
	}
	if out[3].first > out[0].done {
		t.Errorf("second a request waited (first token %v) for the first to finish (%v)", out[3].first, out[0].done)
	}
	if l := st.State().LoRA; l.Loads != 3 || !slices.Equal(l.Resident, []string{"c", "a"}) {
		t.Errorf("loads %d resident %v, want 3 (a once, b, c) and [c a]", l.Loads, l.Resident)
	}
}

func TestLoRALoadDelaysTheFirstPass(t *testing.T) {
	ttft := func(model string, loadMs float64) time.Duration {
		st := loraStepper(t, 2, loadMs)
		return loraRun(t, st, []loraJob{{model: model, output: 1}})[0].first
	}
	base, adapter := ttft("m", 100), ttft("a", 100)
	if d := adapter - base; d != 100*time.Millisecond {
		t.Errorf("adapter TTFT %v - base %v = %v, want the 100ms load", adapter, base, d)
	}
	if d := ttft("a", 0) - base; d != 0 {
		t.Errorf("with no load time the adapter is %v slower", d)
	}
}

func TestLoRAKeysThePrefixCacheByAdapter(t *testing.T) {
	blocks := make([]uint64, 6)
	for i := range blocks {
		blocks[i] = uint64(1000 + i)
	}
	st := loraStepper(t, 2, 0)
	sec := time.Second
	out := loraRun(t, st, []loraJob{
		{model: "a", output: 1, blocks: blocks},
		{model: "a", at: sec, output: 1, blocks: blocks},
		{model: "b", at: 2 * sec, output: 1, blocks: blocks},
		{model: "m", at: 3 * sec, output: 1, blocks: blocks},
	})
	if out[1].cached == 0 {
		t.Error("the same adapter's same prompt found nothing cached")
	}
	if out[2].cached != 0 || out[3].cached != 0 {
		t.Errorf("another adapter (%d) or the base model (%d) hit a's cached blocks", out[2].cached, out[3].cached)
	}
}

func TestLoRASimpleModeLoadDelaysOnlyItsAdapter(t *testing.T) {
	cfg := simConfig(func(c *Config) {
		c.TTFTMs, c.TokensPerSecond = 10, 0
		c.MaxLoras, c.LoRAModules, c.LoRALoadMs = 1, []string{"a", "b"}, 50
	})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := &virtualClock{}
	e, err := newEngine(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := e.Submit(Request{Model: "a", PromptTokens: 10, MaxTokens: 1})
	sb, _ := e.Submit(Request{Model: "b", PromptTokens: 10, MaxTokens: 1})
	sm, _ := e.Submit(Request{Model: "m", PromptTokens: 10, MaxTokens: 1})
	e.mu.Lock()
	for range 10 {
		wait, ok := e.sched.plan(clk.t)
		if !ok {
			break
		}
		clk.t += wait
		e.sched.advance(clk.t)
	}
	e.mu.Unlock()
	if sa.s.firstTokenAt != 60*time.Millisecond || sm.s.firstTokenAt != 10*time.Millisecond {
		t.Errorf("a first token %v (want load 50ms + TTFT 10ms), m %v (want 10ms)", sa.s.firstTokenAt, sm.s.firstTokenAt)
	}
	if sb.s.firstTokenAt != 120*time.Millisecond {
		t.Errorf("b first token %v, want after a's (60ms) plus its own load and TTFT", sb.s.firstTokenAt)
	}
}

func TestLoRARuntimeLoadAndUnload(t *testing.T) {
	cfg := simConfig(func(c *Config) { c.MaxLoras, c.LoRAAvailable = 2, []string{"/lora/x"} })
	e, err := newEngine(cfg, &virtualClock{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(Request{Model: "x", PromptTokens: 1, MaxTokens: 1}); err == nil {
		t.Error("an unregistered adapter was served")
	}
	for _, tt := range []struct {
		name, path string
		want       error
	}{
		{"x", "", ErrBadRequest},
		{"x", "/lora/elsewhere", ErrLoRANotFound},
		{"x", "/lora/x", nil},
		{"x", "/lora/x", ErrLoRAExists},
		{"m", "/lora/x", ErrLoRAExists},
	} {
		if err := e.LoadAdapter(tt.name, tt.path); (tt.want == nil) != (err == nil) || tt.want != nil && !strings.Contains(err.Error(), tt.want.Error()) {
			t.Errorf("load %s %s: %v, want %v", tt.name, tt.path, err, tt.want)
		}
	}
	if _, err := e.Submit(Request{Model: "x", PromptTokens: 1, MaxTokens: 1}); err != nil {
		t.Errorf("loaded adapter refused: %v", err)
	}
	if got := e.Adapters(); len(got) != 1 || got[0] != (LoRAModule{"x", "/lora/x"}) {
		t.Errorf("adapters %v", got)
	}
	if err := e.UnloadAdapter("x"); err != nil {
		t.Fatal(err)
	}
	if err := e.UnloadAdapter("x"); err == nil {
		t.Error("unloading twice succeeded")
	}
	off, _ := newEngine(simConfig(nil), &virtualClock{})
	if err := off.LoadAdapter("x", "/lora/x"); !errors.Is(err, ErrLoRADisabled) {
		t.Errorf("load without LoRA: %v", err)
	}
}

func TestLoRAConfigValidation(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"negative slots", func(c *Config) { c.MaxLoras = -1 }, "max_loras must be >= 0"},
		{"modules without slots", func(c *Config) { c.LoRAModules = []string{"a"} }, "need max_loras"},
		{"adapter named as a model", func(c *Config) { c.MaxLoras, c.LoRAModules = 1, []string{"m"} }, "has a model's name"},
		{"adapter twice", func(c *Config) { c.MaxLoras, c.LoRAModules = 1, []string{"a=/x,a=/y"} }, "listed twice"},
		{"empty path", func(c *Config) { c.MaxLoras, c.LoRAModules = 1, []string{"a="} }, "want name=path"},
		{"slots mode", func(c *Config) { c.MaxLoras, c.Slots = 1, 2 }, "slots mode serves no LoRA"},
		{"negative load", func(c *Config) { c.MaxLoras, c.LoRALoadMs = 1, -1 }, "lora_load_ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := simConfig(tt.mut)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	ok := simConfig(func(c *Config) { c.MaxLoras, c.LoRAModules = 4, []string{"a=/x", "b"} })
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestLoRARequestsInfoGauge(t *testing.T) {
	sn := snapshot{State: State{LoRA: &LoRAState{MaxLoras: 4, Running: []string{"a", "b"}, Waiting: []string{"c"}}}, nowUnix: 1700000000.5}
	got := string(renderMetrics(FormatVLLMV1, sn))
	want := `vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1.7000000005e+09`
	if !strings.Contains(got, want+"\n") || !strings.Contains(got, "# TYPE vllm:lora_requests_info gauge") {
		t.Errorf("metrics lack %s:\n%s", want, got)
	}
	if strings.Contains(string(renderMetrics(FormatVLLM, snapshot{})), "lora_requests_info") {
		t.Error("gauge shown without LoRA")
	}
}
