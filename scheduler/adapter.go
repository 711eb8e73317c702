package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// LoRA adapters on the scheduler's side: which workers can serve an
// adapter (adapterIndex, built with each view), the time a load costs
// each worker (loadTimes, learned by this replica), and the adapter's part
// of a decision. The placement itself is the store's, read and recorded in
// the claim (state.PlaceAdapter); loading through the engine's API is
// load.go's.

// AdapterOptions configure LoRA adapter placement.
type AdapterOptions struct {
	// LoadTime is a load's cost before the first token on a worker that
	// has shown none yet (0: DefaultAdapterLoadTime).
	LoadTime time.Duration
	// Loader, when set, loads the adapter on the chosen worker before the
	// request is routed there (lora.manage); nil: the engines load
	// adapters themselves.
	Loader AdapterLoader
	// LoadTimeout bounds one load (0: DefaultAdapterLoadTimeout).
	LoadTimeout time.Duration
	// Catalog are adapters every worker serving their base serves (the
	// config's lora.adapters), discovered workers too.
	Catalog []state.Adapter
}

// Defaults of AdapterOptions (the config's lora keys read them).
const (
	DefaultAdapterLoadTime    = 2 * time.Second
	DefaultAdapterLoadTimeout = 30 * time.Second
)

// AdapterDecision is the adapter's part of a decision: the adapter and its
// base, its state on the claimed worker (every candidate's is on its
// line), the placement the claim evicted, and what loading it did.
type AdapterDecision struct {
	Name    string `json:"name"`
	Base    string `json:"base"`
	State   string `json:"state,omitempty"`
	Evicted string `json:"evicted,omitempty"`
	// LoadSeconds is the load time the prediction counted on the claimed
	// worker (when the state loads).
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// Loads are the router's loads through the engine's API (lora.manage):
	// each worker tried, how long it took and its error.
	Loads []AdapterLoad `json:"loads,omitempty"`
	// Waited is how long the request waited for another request's load
	// of the adapter on its worker to show in the engine's report.
	Waited float64 `json:"waited_seconds,omitempty"`
}

// AdapterLoad is one load through the engine's API.
type AdapterLoad struct {
	Worker  string  `json:"worker"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// adapterIndex says which adapters exist and which workers serve each.
// A worker serves an adapter its spec lists, one its engine lists in
// /v1/models (with a parent it serves), runs or queues, or one placed on
// it; the base of an adapter only an engine's gauge names is the worker's
// model when it serves one.
type adapterIndex struct {
	base     map[string]string // adapter → base model
	byWorker [][]string        // by snapshot index: adapters it serves
	catalog  map[string]state.Adapter
}

func indexAdapters(snap state.Snapshot, catalog []state.Adapter) adapterIndex {
	ix := adapterIndex{base: map[string]string{}, byWorker: make([][]string, len(snap.Workers)), catalog: map[string]state.Adapter{}}
	add := func(i int, a state.Adapter) {
		w := snap.Workers[i]
		if a.Base == "" {
			if b, ok := ix.base[a.Name]; ok {
				a.Base = b
			} else if len(w.Spec.Models) == 1 {
				a.Base = w.Spec.Models[0]
			}
		}
		if a.Name == "" || !slices.Contains(w.Spec.Models, a.Base) || slices.Contains(w.Spec.Models, a.Name) {
			return
		}
		if _, ok := ix.base[a.Name]; !ok {
			ix.base[a.Name] = a.Base
		}
		if old, ok := ix.catalog[a.Name]; !ok || (old.Path == "" && a.Path != "") {
			ix.catalog[a.Name] = a
		}
		if !slices.Contains(ix.byWorker[i], a.Name) {
			ix.byWorker[i] = append(ix.byWorker[i], a.Name)
		}
	}
	// Declared adapters first: they name their base.
	for i, w := range snap.Workers {
		for _, a := range catalog {
			add(i, a)
		}
		for _, a := range w.Spec.Adapters {
			add(i, a)
		}
		for _, a := range w.Telemetry.Adapters.Listed {
			add(i, a)
		}
	}
	for i, w := range snap.Workers {
		r := w.Telemetry.Adapters
		for _, n := range slices.Concat(r.Running, r.Waiting) {
			add(i, state.Adapter{Name: n})
		}
		for _, p := range w.Adapters {
			add(i, state.Adapter{Name: p.Name})
		}
	}
	return ix
}

// resolve says what model names: a base model (adapter "") or an adapter
// of base.
func (v *view) resolve(model string) (base, adapter string, ok bool) {
	if _, ok := v.byModel[model]; ok {
		return model, "", true
	}
	if b, ok := v.adapters.base[model]; ok {
		return b, model, true
	}
	return "", "", false
}

// Adapters lists the adapters some known worker serves, with their base,
// sorted by name (for /v1/models).
func (s *Scheduler) Adapters() []state.Adapter {
	v := s.view.Load()
	if v == nil {
		return nil
	}
	out := make([]state.Adapter, 0, len(v.adapters.catalog))
	for _, a := range v.adapters.catalog {
		out = append(out, state.Adapter{Name: a.Name, Base: a.Base})
	}
	slices.SortFunc(out, func(a, b state.Adapter) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// loadTimes are the workers' adapter load times as this replica measured
// them: each a moving average of samples, the prior until the first.
type loadTimes struct {
	prior time.Duration
	mu    sync.Mutex
	by    map[string]state.EMA
}

// loadAlpha smooths a worker's load-time samples.
const loadAlpha = 0.3

func (l *loadTimes) seconds(worker string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.by[worker]; ok && e.Samples > 0 {
		return e.Value
	}
	return l.prior.Seconds()
}

func (l *loadTimes) observe(worker string, d time.Duration, at time.Time) {
	if d < 0 {
		d = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]state.EMA{}
	}
	l.by[worker] = l.by[worker].Observe(d.Seconds(), loadAlpha, at)
}

// withLoadTimes fills the candidates' load times for a job naming an
// adapter.
func (s *Scheduler) withLoadTimes(ws []scoring.Worker) {
	for i := range ws {
		ws[i].AdapterLoadSeconds = s.loads.seconds(ws[i].ID)
	}
}

// adapterField logs the adapter's part of a decision when there is one.
func adapterField(a *AdapterDecision) zap.Field {
	if a == nil {
		return zap.Skip()
	}
	return zap.Object("adapter", (*adapterLog)(a))
}

type adapterLog AdapterDecision

func (a *adapterLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", a.Name)
	enc.AddString("base", a.Base)
	enc.AddString("state", a.State)
	if a.Evicted != "" {
		enc.AddString("evicted", a.Evicted)
	}
	if a.LoadSeconds > 0 {
		enc.AddFloat64("load_seconds", a.LoadSeconds)
	}
	for i, l := range a.Loads {
		p := fmt.Sprintf("load_%d_", i)
		enc.AddString(p+"worker", l.Worker)
		enc.AddFloat64(p+"seconds", l.Seconds)
		if l.Error != "" {
			enc.AddString(p+"error", l.Error)
		}
	}
	if a.Waited > 0 {
		enc.AddFloat64("waited_seconds", a.Waited)
	}
	return nil
}
