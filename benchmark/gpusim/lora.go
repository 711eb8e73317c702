package gpusim

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// LoRA outcomes of the run-time adapter API; the HTTP layer maps them to
// vLLM's statuses and bodies.
var (
	// ErrLoRAExists: an adapter of that name is already registered.
	ErrLoRAExists = errors.New("lora adapter already loaded")
	// ErrLoRANotFound: no such registered adapter, or no adapter at the
	// path given.
	ErrLoRANotFound = errors.New("lora adapter not found")
	// ErrLoRADisabled: the engine serves no adapters (max_loras 0).
	ErrLoRADisabled = errors.New("lora is not enabled")
)

// AdapterError is a failure of the run-time adapter API: its kind (one of
// the errors above, or ErrBadRequest) and vLLM's message for it.
type AdapterError struct {
	Kind    error
	Message string
}

func (e *AdapterError) Error() string { return e.Kind.Error() + ": " + e.Message }

// Unwrap is the kind, for errors.Is.
func (e *AdapterError) Unwrap() error { return e.Kind }

func adapterErr(kind error, format string, a ...any) error {
	return &AdapterError{Kind: kind, Message: fmt.Sprintf(format, a...)}
}

// DefaultLoRALoadMs is the time an adapter takes to enter a GPU slot. No
// published figure fits every setup; this assumes a rank-16 adapter of an
// 8B model (some tens of MB) read from local storage into GPU memory,
// which takes some tens to a few hundred ms. Runs that care set
// lora_load_ms.
const DefaultLoRALoadMs = 100

// LoRAModule is an adapter the engine serves from its start, as vLLM's
// --lora-modules name=path.
type LoRAModule struct {
	Name, Path string
}

// ParseLoRAModule reads "name=path", or "name" alone (the path is then the
// name).
func ParseLoRAModule(s string) (LoRAModule, error) {
	name, path, ok := strings.Cut(s, "=")
	name, path = strings.TrimSpace(name), strings.TrimSpace(path)
	if !ok {
		path = name
	}
	if name == "" || path == "" {
		return LoRAModule{}, fmt.Errorf("lora module %q: want name=path", s)
	}
	return LoRAModule{Name: name, Path: path}, nil
}

// loraBank is an engine's LoRA state as vLLM keeps it: the adapters
// registered (servable: from --lora-modules or loaded at run time), and
// max_loras GPU slots holding the adapters batches may use.
//
// vLLM's scheduler admits a waiting request only if its adapter is among
// those of the running batch or fewer than max_loras adapters are in the
// batch; otherwise it skips the request (which keeps its place) and looks
// at the next. An adapter enters a slot when a request of it is admitted
// and it is not resident, evicting the least recently used resident
// adapter that no running request uses, so an adapter with running
// requests is never evicted. Each entry costs the load time, paid by the
// forward pass that first uses it (vLLM activates adapters synchronously
// before the pass), so a load delays every sequence of that pass.
//
// Simplified: one load time per slot entry, whatever the adapter (vLLM's
// CPU cache of max_cpu_loras adapters, which defaults to max_loras, is not
// modelled separately), and a run-time load only registers the adapter;
// its load time is paid when it first enters a slot.
type loraBank struct {
	max   int
	load  time.Duration // per slot entry, before slowdown
	base  string        // the parent model of every adapter
	paths map[string]string
	order []string // registered adapters, in registration order
	// available are the adapters a run-time load finds (nil: any).
	available map[string]bool
	slots     []string       // resident adapters, least recently used first
	running   map[string]int // running sequences per adapter
	loads     uint64
	pending   int // slot entries in the step being planned
	// readyAt is when each adapter's latest slot entry completes (simple
	// mode, where streams do not share forward passes).
	readyAt map[string]time.Duration
}

// newLoRABank is cfg's LoRA state; nil when LoRA is off (max_loras 0).
func newLoRABank(cfg Config) (*loraBank, error) {
	if cfg.MaxLoras == 0 {
		return nil, nil
	}
	b := &loraBank{
		max: cfg.MaxLoras, load: duration(cfg.LoRALoadMs * float64(time.Millisecond)),
		base: cfg.Models[0], paths: map[string]string{}, running: map[string]int{},
		readyAt: map[string]time.Duration{},
	}
	if len(cfg.LoRAAvailable) > 0 {
		b.available = map[string]bool{}
		for _, a := range cfg.LoRAAvailable {
			m, err := ParseLoRAModule(a)
			if err != nil {
				return nil, err
			}
			b.available[m.Path] = true
		}
	}
	for _, s := range cfg.LoRAModules {
		m, err := ParseLoRAModule(s)
		if err != nil {
			return nil, err
		}
		b.paths[m.Name] = m.Path
		b.order = append(b.order, m.Name)
	}
	return b, nil
}

// register makes an adapter servable, as /v1/load_lora_adapter does.
func (b *loraBank) register(name, path string) error {
	if _, ok := b.paths[name]; ok {
		return adapterErr(ErrLoRAExists, "The lora adapter '%s' has already been loaded.", name)
	}
	if b.available != nil && !b.available[path] {
		return adapterErr(ErrLoRANotFound, "Loading lora %s failed: No adapter found for %s", name, path)
	}
	b.paths[name] = path
	b.order = append(b.order, name)
	return nil
}

// unregister makes an adapter unservable, as /v1/unload_lora_adapter does.
// Requests of it already queued or running still finish; its slot frees
// once none runs.
func (b *loraBank) unregister(name string) error {
	if _, ok := b.paths[name]; !ok {
		return adapterErr(ErrLoRANotFound, "The lora adapter '%s' cannot be found.", name)
	}
	delete(b.paths, name)
	b.order = slices.DeleteFunc(b.order, func(n string) bool { return n == name })
	if b.running[name] == 0 {
		b.slots = slices.DeleteFunc(b.slots, func(n string) bool { return n == name })
	}
	return nil
}

func (b *loraBank) resident(name string) bool { return slices.Contains(b.slots, name) }

// admissible is vLLM's max_loras check: a request of name may join the
// batch if name is resident (it then has a slot) or the adapters in the
// batch leave a slot free or idle.
func (b *loraBank) admissible(name string) bool {
	return b.resident(name) || len(b.running) < b.max
}

// activate gives name a slot for a sequence joining the batch, and reports
// whether that took a load.
func (b *loraBank) activate(name string) bool {
	if i := slices.Index(b.slots, name); i >= 0 {
		b.slots = append(slices.Delete(b.slots, i, i+1), name)
		b.running[name]++
		return false
	}
	if len(b.slots) >= b.max {
		// admissible guaranteed an idle resident adapter.
		i := slices.IndexFunc(b.slots, func(n string) bool { return b.running[n] == 0 })
		b.slots = slices.Delete(b.slots, i, i+1)
	}
	b.slots = append(b.slots, name)
	b.running[name]++
	b.loads++
	b.pending++
	return true
}

// stopped notes a sequence of name leaving the batch (finished, preempted
// or cancelled).
func (b *loraBank) stopped(name string) {
	if b.running[name]--; b.running[name] <= 0 {
		delete(b.running, name)
		if _, ok := b.paths[name]; !ok { // unloaded while it ran
			b.slots = slices.DeleteFunc(b.slots, func(n string) bool { return n == name })
		}
	}
}

// takePending returns the slot entries since the last call.
func (b *loraBank) takePending() int {
	n := b.pending
	b.pending = 0
	return n
}

// LoRAState is an engine's adapters as vLLM's lora_requests_info gauge and
// its /v1/models show them.
type LoRAState struct {
	MaxLoras int `json:"max_loras"`
	// Running and Waiting are the adapters with requests running, and
	// waiting, sorted.
	Running []string `json:"running_adapters"`
	Waiting []string `json:"waiting_adapters"`
	// Resident are the adapters in GPU slots, least recently used first;
	// Registered those the engine serves, in registration order.
	Resident   []string `json:"resident_adapters"`
	Registered []string `json:"registered_adapters"`
	// Loads counts slot entries since start.
	Loads uint64 `json:"loads"`
}

// state is the bank's state with the waiting queue's adapters.
func (b *loraBank) state(waiting []*seq) *LoRAState {
	st := &LoRAState{
		MaxLoras: b.max, Loads: b.loads,
		Resident: slices.Clone(b.slots), Registered: slices.Clone(b.order),
	}
	for a := range b.running {
		st.Running = append(st.Running, a)
	}
	sort.Strings(st.Running)
	seen := map[string]bool{}
	for _, s := range waiting {
		if s.adapter != "" && !seen[s.adapter] {
			seen[s.adapter] = true
			st.Waiting = append(st.Waiting, s.adapter)
		}
	}
	sort.Strings(st.Waiting)
	return st
}

// adapterBlocks keys a prompt's block hashes by its adapter, as vLLM puts
// the LoRA id in the hash of every block: the same text under two
// adapters (or an adapter and the base model) shares no cached block. The
// keying is the router's (prefix.ForAdapter), so that both name a block
// alike.
func adapterBlocks(blocks []uint64, adapter string) []uint64 {
	return prefix.ForAdapter(adapter, blocks)
}

// check verifies the bank against the running batch: at most max_loras
// adapters resident, every adapter of a running sequence resident, and
// the per-adapter counts those of the batch.
func (b *loraBank) check(running []*seq) error {
	if len(b.slots) > b.max {
		return fmt.Errorf("%d adapters resident > max_loras %d", len(b.slots), b.max)
	}
	counts := map[string]int{}
	for _, s := range running {
		if s.adapter == "" {
			continue
		}
		if !s.loraHeld || !b.resident(s.adapter) {
			return fmt.Errorf("seq %d runs adapter %s without its slot", s.id, s.adapter)
		}
		counts[s.adapter]++
	}
	if len(counts) != len(b.running) {
		return fmt.Errorf("%d adapters running, bank counts %d", len(counts), len(b.running))
	}
	for a, n := range counts {
		if b.running[a] != n {
			return fmt.Errorf("adapter %s: %d running, bank counts %d", a, n, b.running[a])
		}
	}
	return nil
}

// LoadAdapter registers an adapter at run time, as vLLM's
// /v1/load_lora_adapter: it is servable at once and enters a slot when a
// request of it is first admitted.
func (e *Engine) LoadAdapter(name, path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.lora == nil:
		return ErrLoRADisabled
	case name == "" || path == "":
		return adapterErr(ErrBadRequest, "Both 'lora_name' and 'lora_path' must be provided.")
	case e.models[name] != nil:
		return adapterErr(ErrLoRAExists, "The lora adapter '%s' has already been loaded.", name)
	}
	return e.lora.register(name, path)
}

// UnloadAdapter makes an adapter unservable, as vLLM's
// /v1/unload_lora_adapter; requests of it already submitted finish.
func (e *Engine) UnloadAdapter(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.lora == nil:
		return ErrLoRADisabled
	case name == "":
		return adapterErr(ErrBadRequest, "'lora_name' must be provided.")
	}
	return e.lora.unregister(name)
}

// Adapters are the registered adapters, in registration order; nil
// without LoRA.
func (e *Engine) Adapters() []LoRAModule {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lora == nil {
		return nil
	}
	out := make([]LoRAModule, len(e.lora.order))
	for i, n := range e.lora.order {
		out[i] = LoRAModule{Name: n, Path: e.lora.paths[n]}
	}
	return out
}
