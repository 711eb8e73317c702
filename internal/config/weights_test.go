package config

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/scoring"
)

// A term and a strategy registered the way any package outside scoring
// registers them, after this package's Keys were built.
func init() {
	scoring.RegisterTerm(scoring.SnapshotTerm{
		Name: "config_test_term", Key: "config_test", Default: 4, Doc: "a test term", Reads: "nothing",
		Prepare: scoring.PerWorker(func(*scoring.Worker) scoring.Signal { return scoring.Known(1) }),
	})
	scoring.RegisterStrategy("config_test_strategy", func(scoring.Params) scoring.Strategy { return nil })
}

func TestWeightsReadEveryRegisteredTerm(t *testing.T) {
	cfg, err := Parse([]byte("scoring:\n  weights:\n    queue: 20\n    latency: 0\n    active: 50\n    config_test: 7\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Scoring.Weights
	if w.Terms["queue"] != 20 || w.Terms["latency"] != 0 || w.Active != 50 || w.Terms["config_test"] != 7 {
		t.Fatalf("weights not read: %+v", w)
	}
	// Keys the file leaves out keep their defaults.
	if w.Terms["kv_pressure"] != 15 || w.Prefix != 300 || w.TokenLoad != 1000 {
		t.Fatalf("defaults lost: %+v", w)
	}
	for _, term := range scoring.Terms() {
		if _, ok := Default().Scoring.Weights.Terms[term.Key]; !ok {
			t.Errorf("Default() has no weight for the registered term %s", term.Name)
		}
	}
	env, err := Parse(nil, envOf(map[string]string{"SCORING_WEIGHT_QUEUE": "3", "SCORING_WEIGHT_CONFIG_TEST": "9", "SCORING_WEIGHT_ACTIVE": "80"}))
	if err != nil {
		t.Fatal(err)
	}
	if w := env.Scoring.Weights; w.Terms["queue"] != 3 || w.Terms["config_test"] != 9 || w.Active != 80 {
		t.Fatalf("env not applied: %+v", w)
	}
	set := Default()
	if err := Set(&set, "scoring.weights.gpu_util", "2"); err != nil {
		t.Fatal(err)
	}
	if set.Scoring.Weights.Terms["gpu_util"] != 2 {
		t.Fatalf("Set did not set gpu_util: %+v", set.Scoring.Weights)
	}
}

// Copies of a Config share the terms' map until one is changed; a change
// must not reach the other copy.
func TestWeightsCopiesDoNotShareChanges(t *testing.T) {
	a := Default()
	b := a
	if err := Set(&b, "scoring.weights.queue", "99"); err != nil {
		t.Fatal(err)
	}
	if a.Scoring.Weights.Terms["queue"] != 10 {
		t.Fatalf("setting a copy changed the original: %v", a.Scoring.Weights.Terms)
	}
}

func TestBadWeightNamesTheKey(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"scoring:\n  weights:\n    queu: 1\n", "scoring.weights.queu (line 3): unknown key queu"},
		{"scoring:\n  weights:\n    queue: lots\n", "scoring.weights.queue (line 3): want a number"},
		{"scoring:\n  weights: 3\n", "scoring.weights must be a mapping"},
	}
	for _, tc := range tests {
		if _, err := Parse([]byte(tc.yaml), noEnv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	c.Scoring.Weights.Terms = map[string]float64{"nope": 1}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "scoring.weights.nope: no such term") {
		t.Errorf("a weight for no term: %v", err)
	}
	if err := Set(&c, "scoring.weights.nope", "1"); err == nil {
		t.Error("Set accepted a weight for no term")
	}
}

// A written configuration reads back the same weights (the benchmark
// writes its routers' configurations).
func TestWeightsRoundTrip(t *testing.T) {
	c := Default()
	if err := Set(&c, "scoring.weights.distance", "0.25"); err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(raw, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Scoring.Weights, c.Scoring.Weights; !equalConfig(Config{Scoring: Scoring{Weights: got}}, Config{Scoring: Scoring{Weights: want}}) {
		t.Fatalf("read back %+v, wrote %+v", got, want)
	}
}

// Keys, and so docs/configuration.md, list a row per term scoring
// registers, with the term's own default.
func TestKeysListTheRegisteredTerms(t *testing.T) {
	for _, term := range scoring.Terms() {
		if term.Key == "config_test" {
			continue // registered after Keys was built: settable, not documented
		}
		i := slices.IndexFunc(Keys, func(k Key) bool { return k.Path == "scoring.weights."+term.Key })
		if i < 0 {
			t.Errorf("no key for the term %s", term.Name)
			continue
		}
		if k := Keys[i]; !strings.Contains(k.Doc, term.Name) || k.Env != "SCORING_WEIGHT_"+strings.ToUpper(term.Key) {
			t.Errorf("key %+v does not document the term %s", k, term.Name)
		}
	}
}

// The strategy key accepts the strategies registered in the binary: the
// product's own, and one registered elsewhere (as llm-bench registers the
// emulations of other schedulers) — and not those, in a binary that does
// not link them, such as llm-router and this test.
func TestStrategiesAreTheRegisteredOnes(t *testing.T) {
	product := []string{scoring.RoundRobin, scoring.LeastLoaded, scoring.LatencyBased, scoring.InferenceAware, scoring.Scored, scoring.Predicted}
	for _, name := range append(slices.Clone(product), "config_test_strategy") {
		c := Default()
		c.Strategy = name
		if err := c.Validate(); err != nil && strings.Contains(err.Error(), "strategy") {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := Default()
	c.Strategy = "queue_kv_max_score"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `strategy: unknown strategy "queue_kv_max_score"`) {
		t.Errorf("an emulation is accepted without scoring/emulate linked: %v", err)
	}
	if Default().Strategy != scoring.Predicted {
		t.Error("the default strategy for new installs must be predicted")
	}
	// The key's documentation (and so docs/configuration.md) names each of
	// the product's strategies.
	for _, k := range Keys {
		if k.Path != "strategy" {
			continue
		}
		for _, name := range product {
			if !strings.Contains(k.Doc, name) {
				t.Errorf("the strategy key's doc does not name %s", name)
			}
		}
	}
}
