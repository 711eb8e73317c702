package scoring

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// evalTerm evaluates the registered term name for every worker of ws, as
// scored does for one decision.
func evalTerm(t *testing.T, name string, job Job, p Params, ws ...Worker) []Signal {
	t.Helper()
	i := slices.IndexFunc(Terms(), func(s SnapshotTerm) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("no registered term %s", name)
	}
	f := Terms()[i].Prepare(&TermInput{Job: job, Eligible: ws, Params: p})
	out := make([]Signal, len(ws))
	for j := range ws {
		out[j] = f(&ws[j])
	}
	return out
}

// termCase is one row of a term's table test: the workers of one
// decision and the value each should get.
type termCase struct {
	name    string
	job     Job
	params  Params
	workers []Worker
	want    []Signal
}

func runTermCases(t *testing.T, term string, cases []termCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := evalTerm(t, term, tc.job, tc.params, tc.workers...)
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Known != w.Known || (w.Known && !near(g.Value, w.Value)) {
					t.Errorf("%s of %s = %+v, want %+v", term, tc.workers[i].ID, g, w)
				}
			}
		})
	}
}

// The registry holds the product's terms, each once, with a key, a doc and
// a default; scored builds a breakdown line per registered term in the
// registry's order, weighted from Params.
func TestRegisteredTerms(t *testing.T) {
	want := map[string]string{
		"queue": "queue", "norm_latency": "latency", "norm_job_cost": "job_cost", "norm_throughput": "throughput",
		"node_distance": "distance", "kv_pressure": "kv_pressure", "gpu_util": "gpu_util",
	}
	terms := Terms()
	if !slices.IsSortedFunc(terms, func(a, b SnapshotTerm) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	}) {
		t.Errorf("terms not sorted by name")
	}
	for name, key := range want {
		i := slices.IndexFunc(terms, func(s SnapshotTerm) bool { return s.Name == name })
		if i < 0 {
			t.Errorf("%s is not registered", name)
			continue
		}
		if tm := terms[i]; tm.Key != key || tm.Doc == "" || tm.Reads == "" || tm.Default <= 0 {
			t.Errorf("%s: %+v", name, tm)
		}
	}
	s, _ := New(Scored, params())
	plan := Build(s, Input{Job: Job{Model: "m"}, Workers: []Worker{worker("a")}})
	got := plan.Candidates[0].Terms
	if len(got) != len(terms) {
		t.Fatalf("%d terms in the breakdown, %d registered", len(got), len(terms))
	}
	for i, tm := range got {
		w := params().Weights.Terms[terms[i].Key]
		if terms[i].Subtracted {
			w = -w
		}
		if tm.Name != terms[i].Name || tm.Weight != w {
			t.Errorf("breakdown term %d = %+v, want %s weighted %v", i, tm, terms[i].Name, w)
		}
	}
}

func TestRegisterTermRefusesClashes(t *testing.T) {
	f := PerWorker(func(*Worker) Signal { return Signal{} })
	for _, tc := range []SnapshotTerm{
		{Name: "queue", Key: "other_key", Prepare: f},
		{Name: "other_name", Key: "queue", Prepare: f},
		{Name: "x", Key: "active", Prepare: f},
		{Name: "x", Key: "x"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterTerm(%+v) did not panic", tc)
				}
			}()
			RegisterTerm(tc)
		}()
	}
}

func TestUnknownStrategyNamesTheRegistered(t *testing.T) {
	_, err := New("fastest", Params{})
	if err == nil || !slices.ContainsFunc(Names(), func(n string) bool { return n == Scored }) {
		t.Fatalf("New(fastest) = %v; names %v", err, Names())
	}
}

// The sources the test below reads, embedded: scoring does no I/O, not
// even in tests (the lint holds it to that).
var (
	//go:embed doc.go
	docSource string
	//go:embed term_*.go
	termSources embed.FS
)

// doc.go defines every registered term, and each lives in its own file.
func TestDocDefinesEveryTerm(t *testing.T) {
	for _, tm := range Terms() {
		file := "term_" + tm.Name + ".go"
		if !strings.Contains(docSource, "//   - "+tm.Name+" ("+file+")") {
			t.Errorf("doc.go does not define %s (%s)", tm.Name, file)
		}
		if _, err := fs.Stat(termSources, file); err != nil {
			t.Errorf("%s: %v", tm.Name, err)
		}
	}
}
