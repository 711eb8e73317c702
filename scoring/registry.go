package scoring

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// The registries are scoring's only package state. They are written by
// init functions (RegisterTerm, RegisterStrategy) and read when a strategy
// is built, never during a decision: a built strategy keeps its own copy
// of the terms, so decisions stay pure functions of their input.
var registry struct {
	mu         sync.RWMutex
	terms      []SnapshotTerm // sorted by Name
	strategies []string       // registration order: scoring's own first
	factories  map[string]StrategyFactory
}

// LiveWeightKeys are the weight keys the store evaluates inside the atomic
// claim (scoring.weights.<key>); no snapshot term may take them.
func LiveWeightKeys() []string { return []string{"active", "prefix", "token_load"} }

// RegisterTerm adds a snapshot term to the scored formula; scored includes
// it in every plan it builds afterwards, with the weight
// Params.Weights.Terms[t.Key]. Call it from an init function in the term's
// own file. It panics when the term lacks a name, key or Prepare, or reuses
// a registered name or key or a live weight's key: a broken registration
// is a programming error that must stop the binary at start.
func RegisterTerm(t SnapshotTerm) {
	if t.Name == "" || t.Key == "" || t.Prepare == nil {
		panic(fmt.Sprintf("scoring: RegisterTerm(%q, key %q): name, key and Prepare are required", t.Name, t.Key))
	}
	if slices.Contains(LiveWeightKeys(), t.Key) {
		panic(fmt.Sprintf("scoring: RegisterTerm(%q): key %q is a live weight", t.Name, t.Key))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for _, o := range registry.terms {
		if o.Name == t.Name || o.Key == t.Key {
			panic(fmt.Sprintf("scoring: RegisterTerm(%q, key %q): taken by %q (key %q)", t.Name, t.Key, o.Name, o.Key))
		}
	}
	registry.terms = append(registry.terms, t)
	// Sorted by name, so the order does not depend on which file's init
	// ran first: the breakdown's columns and the sum's order are stable.
	slices.SortFunc(registry.terms, func(a, b SnapshotTerm) int { return strings.Compare(a.Name, b.Name) })
}

// Terms returns the registered snapshot terms, sorted by name: the order
// scored evaluates them in and the breakdown lists them in.
func Terms() []SnapshotTerm {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return slices.Clone(registry.terms)
}

// LookupTerm returns the registered term whose weight key is key.
func LookupTerm(key string) (SnapshotTerm, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	for _, t := range registry.terms {
		if t.Key == key {
			return t, true
		}
	}
	return SnapshotTerm{}, false
}

// DefaultTermWeights returns every registered term's default weight by key,
// a fresh map. The configuration starts from it (internal/config).
func DefaultTermWeights() map[string]float64 {
	out := map[string]float64{}
	for _, t := range Terms() {
		out[t.Key] = t.Default
	}
	return out
}

// StrategyFactory makes a fresh instance of a strategy: each scheduler (one
// per router replica) gets its own, so a strategy that keeps state keeps
// it per replica.
type StrategyFactory func(p Params) Strategy

// RegisterStrategy makes name selectable (the strategy key). Call it from
// an init function in the strategy's own package: scoring registers the
// product's strategies; a binary offers other strategies only by linking
// the package that registers them (the benchmark's emulations of other
// schedulers, scoring/emulate, are linked by llm-bench alone). It panics on
// an empty name, a nil factory or a name already taken.
func RegisterStrategy(name string, f StrategyFactory) {
	if name == "" || f == nil {
		panic(fmt.Sprintf("scoring: RegisterStrategy(%q): name and factory are required", name))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, taken := registry.factories[name]; taken {
		panic(fmt.Sprintf("scoring: RegisterStrategy(%q): already registered", name))
	}
	if registry.factories == nil {
		registry.factories = map[string]StrategyFactory{}
	}
	registry.factories[name] = f
	registry.strategies = append(registry.strategies, name)
}

// Names lists the strategies this binary can build, in registration
// order: the product's own first.
func Names() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return slices.Clone(registry.strategies)
}

// New returns a fresh instance of the named strategy.
func New(name string, p Params) (Strategy, error) {
	registry.mu.RLock()
	f, ok := registry.factories[name]
	registry.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown strategy %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	return f(p), nil
}
