package config

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/scoring"
)

// Weights are the coefficients of the scored formula; lower totals win.
// scoring.weights holds the live weights below and one weight for each
// snapshot term registered in scoring (scoring.RegisterTerm), under the
// term's key: a new term's weight is read, defaulted, set from the
// environment and documented with no change here.
type Weights struct {
	// Active weighs a worker's live in-flight requests; Prefix the share of
	// the prompt's blocks the worker was not sent before; TokenLoad its
	// in-flight tokens relative to its KV capacity. All three are read live
	// in the atomic claim.
	Active    float64 `yaml:"active"`
	Prefix    float64 `yaml:"prefix"`
	TokenLoad float64 `yaml:"token_load"`
	// Terms are the snapshot terms' weights by key. Default fills every
	// registered term's default; the map is replaced, never written in
	// place, so copies of a Config do not share changes.
	Terms map[string]float64 `yaml:"-"`
}

// live returns the field of a live weight's key, nil for any other key.
func (w *Weights) live(key string) *float64 {
	switch key {
	case "active":
		return &w.Active
	case "prefix":
		return &w.Prefix
	case "token_load":
		return &w.TokenLoad
	}
	return nil
}

// set sets the weight of key, a live weight or a registered term's key.
func (w *Weights) set(key string, v float64) error {
	if p := w.live(key); p != nil {
		*p = v
		return nil
	}
	if _, ok := scoring.LookupTerm(key); !ok {
		return fmt.Errorf("no such weight %q (want one of %s)", key, strings.Join(weightKeys(), ", "))
	}
	m := maps.Clone(w.Terms)
	if m == nil {
		m = map[string]float64{}
	}
	m[key] = v
	w.Terms = m
	return nil
}

// weightKeys lists every key scoring.weights accepts.
func weightKeys() []string {
	keys := scoring.LiveWeightKeys()
	for _, t := range scoring.Terms() {
		keys = append(keys, t.Key)
	}
	return keys
}

// UnmarshalYAML reads scoring.weights over the defaults already in w,
// refusing any key that is neither a live weight nor a registered term's,
// as strictly as the rest of the file.
func (w *Weights) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: scoring.weights must be a mapping of weight keys to numbers", n.Line)}}
	}
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var f float64
		if err := v.Decode(&f); err != nil {
			errs = append(errs, fmt.Sprintf("line %d: want a number, got %q", v.Line, v.Value))
			continue
		}
		if err := w.set(k.Value, f); err != nil {
			// The wording of yaml.v3's own unknown-field error, which
			// yamlMessage turns into "scoring.weights.K (line N): unknown key K".
			errs = append(errs, fmt.Sprintf("line %d: field %s not found in type config.Weights", k.Line, k.Value))
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// MarshalYAML writes every weight, the terms' included, so a written
// configuration reads back the same.
func (w Weights) MarshalYAML() (any, error) {
	out := make(map[string]float64, len(w.Terms)+3)
	maps.Copy(out, w.Terms)
	out["active"], out["prefix"], out["token_load"] = w.Active, w.Prefix, w.TokenLoad
	return out, nil
}

// Scoring converts the weights into scoring's (a copy of the terms' map).
func (w Weights) Scoring() scoring.Weights {
	return scoring.Weights{Active: w.Active, Prefix: w.Prefix, TokenLoad: w.TokenLoad, Terms: maps.Clone(w.Terms)}
}

// defaultWeights are the live weights' defaults and every registered
// term's own.
func defaultWeights() Weights {
	return Weights{
		Active: 100,
		// Chosen on held-out benchmark seeds (4-6), judged on seeds 1-3:
		// docs/benchmark-results.md.
		Prefix: 300, TokenLoad: 1000,
		Terms: scoring.DefaultTermWeights(),
	}
}

// termKeys are the Keys rows of the snapshot terms' weights, one per term
// registered when the package is initialised, sorted by term name.
func termKeys() []Key {
	var out []Key
	for _, t := range scoring.Terms() {
		out = append(out, termKey(t))
	}
	return out
}

func termKey(t scoring.SnapshotTerm) Key {
	doc := fmt.Sprintf("weight of the scored term %s: %s; reads %s", t.Name, t.Doc, t.Reads)
	if t.Subtracted {
		doc += " (subtracted: a higher value wins)"
	}
	key := t.Key
	return Key{
		Path:    "scoring.weights." + key,
		Env:     "SCORING_WEIGHT_" + strings.ToUpper(key),
		Default: strconv.FormatFloat(t.Default, 'g', -1, 64),
		Doc:     doc,
		apply: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("want a number, got %q", v)
			}
			return c.Scoring.Weights.set(key, f)
		},
	}
}

// settable is Keys with a row for every term registered after the package
// was initialised (by a package that imports this one, or a test), so that
// Set and the environment reach every registered term.
func settable() []Key {
	out := Keys
	for _, t := range scoring.Terms() {
		if !keyListed("scoring.weights." + t.Key) {
			out = append(out[:len(out):len(out)], termKey(t))
		}
	}
	return out
}

func keyListed(path string) bool {
	for _, k := range Keys {
		if k.Path == path {
			return true
		}
	}
	return false
}
