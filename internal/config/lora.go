package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/llm-router/llm-router/state"
)

// LoRA configures LoRA adapters (docs/lora.md): a request naming an
// adapter as its model runs on a worker serving the adapter's base model,
// placed where the adapter is loaded or can be.
type LoRA struct {
	// Manage makes the router load the adapter on the chosen worker
	// through the engine's /v1/load_lora_adapter before routing (and
	// unload the least recently used one when the worker is full). Off:
	// the engines load adapters themselves (vLLM's --lora-modules).
	Manage bool `yaml:"manage"`
	// LoadTime is a load's cost before the first token on a worker that
	// has not yet shown its own (the prior the learned figure starts
	// from).
	LoadTime Duration `yaml:"load_time"`
	// LoadTimeout bounds one load through the engine's API (manage).
	LoadTimeout Duration `yaml:"load_timeout"`
	// Adapters is the adapter catalog: each is served by every worker
	// serving its base model (a model pool's adapters), and by name from
	// workers[].adapters.
	Adapters []LoRAAdapter `yaml:"adapters"`
}

// LoRAAdapter is one adapter of the catalog.
type LoRAAdapter struct {
	Name string `yaml:"name"`
	Base string `yaml:"base"`
	// Path is what the engine loads (vLLM's lora_path); required with
	// manage.
	Path string `yaml:"path"`
}

func defaultLoRA() LoRA {
	return LoRA{LoadTime: Duration(2 * time.Second), LoadTimeout: Duration(30 * time.Second)}
}

func loraKeys() []Key {
	return []Key{
		{Path: "lora.manage", Env: "LORA_MANAGE", Default: "false", Doc: "the router loads a request's LoRA adapter on the chosen worker through the engine's /v1/load_lora_adapter before routing, unloading the least recently used when the worker's slots are full; a failed load is retried once on another worker (docs/lora.md)", apply: setBool(func(c *Config) *bool { return &c.LoRA.Manage })},
		{Path: "lora.load_time", Env: "LORA_LOAD_TIME_SECONDS", Default: "2s", Doc: "what an adapter load adds to the time to first token on a worker that has not shown its own yet (then learned from the first tokens that follow loads)", apply: setDuration(func(c *Config) *Duration { return &c.LoRA.LoadTime })},
		{Path: "lora.load_timeout", Env: "LORA_LOAD_TIMEOUT_SECONDS", Default: "30s", Doc: "bound on one adapter load through the engine's API (lora.manage)", apply: setDuration(func(c *Config) *Duration { return &c.LoRA.LoadTimeout })},
		{Path: "lora.adapters[].{name,base,path}", Env: "", Default: "", Doc: "the adapter catalog: each adapter is served by every worker serving its base model; path is what the engine loads (required with lora.manage)"},
	}
}

// validate checks the catalog and the workers' adapters.
func (l LoRA) validate(ws []Worker, bad func(key, format string, args ...any)) {
	if l.LoadTime.D() < 0 || l.LoadTime.D() > 10*time.Minute {
		bad("lora.load_time", "must be between 0 and 10m, got %s", l.LoadTime)
	}
	if l.LoadTimeout.D() <= 0 || l.LoadTimeout.D() > 10*time.Minute {
		bad("lora.load_timeout", "must be above 0 and at most 10m, got %s", l.LoadTimeout)
	}
	models := map[string]bool{}
	for _, w := range ws {
		for _, m := range w.Models {
			models[m] = true
		}
	}
	seen := map[string]bool{}
	for i, a := range l.Adapters {
		key := fmt.Sprintf("lora.adapters[%d]", i)
		switch {
		case a.Name == "" || a.Base == "":
			bad(key, "needs a name and a base")
		case seen[a.Name]:
			bad(key, "adapter %s is listed twice", a.Name)
		case models[a.Name]:
			bad(key, "adapter %s has the name of a model", a.Name)
		case l.Manage && a.Path == "":
			bad(key, "adapter %s needs a path with lora.manage", a.Name)
		}
		seen[a.Name] = true
	}
	for i, w := range ws {
		if w.MaxLoras < 0 {
			bad(fmt.Sprintf("workers[%d].max_loras", i), "must not be negative")
		}
		for _, name := range w.Adapters {
			if _, err := l.adapter(w, name); err != nil {
				bad(fmt.Sprintf("workers[%d].adapters", i), "%v", err)
			}
		}
	}
}

// adapter resolves a worker's adapter name: the catalog's entry, or an
// adapter of the worker's only model.
func (l LoRA) adapter(w Worker, name string) (state.Adapter, error) {
	for _, a := range l.Adapters {
		if a.Name == name {
			if !slices.Contains(w.Models, a.Base) {
				return state.Adapter{}, fmt.Errorf("adapter %s is of %s, which worker %s does not serve", name, a.Base, w.ID)
			}
			return state.Adapter{Name: a.Name, Base: a.Base, Path: a.Path}, nil
		}
	}
	if len(w.Models) != 1 {
		return state.Adapter{}, fmt.Errorf("adapter %s of worker %s: list it in lora.adapters with its base (the worker serves %d models)", name, w.ID, len(w.Models))
	}
	return state.Adapter{Name: name, Base: w.Models[0]}, nil
}

// WorkerAdapters are the adapters worker w's own list names, resolved
// (the catalog's apply to every worker, discovered ones too, through
// Catalog).
func (l LoRA) WorkerAdapters(w Worker) []state.Adapter {
	var out []state.Adapter
	for _, name := range w.Adapters {
		if a, err := l.adapter(w, name); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// Catalog is lora.adapters as the scheduler takes it.
func (l LoRA) Catalog() []state.Adapter {
	out := make([]state.Adapter, len(l.Adapters))
	for i, a := range l.Adapters {
		out[i] = state.Adapter{Name: a.Name, Base: a.Base, Path: a.Path}
	}
	return out
}
