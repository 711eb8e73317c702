package metrics_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/scoring/latency"
)

var update = flag.Bool("update", false, "rewrite testdata/*.prom from what the tests record")

// scoreTerms stands in for the scheduler's scrape-time collector of
// llm_router_node_score_term.
type scoreTerms struct{}

func (scoreTerms) Describe(ch chan<- *prometheus.Desc) { ch <- metrics.ScoreTermDesc }

func (scoreTerms) Collect(ch chan<- prometheus.Metric) {
	for _, t := range []struct {
		node, term string
		v          float64
	}{
		{"gpu-0", "active", 1},
		{"gpu-0", "norm_latency", 0.25},
		{"gpu-1", "active", 0},
		{"gpu-1", "norm_latency", 0.5},
	} {
		ch <- prometheus.MustNewConstMetric(metrics.ScoreTermDesc, prometheus.GaugeValue, t.v, "llama-3-8b", t.node, t.term)
	}
}

// recorded returns metrics on a fresh registry after a representative set
// of observations on every metric: each histogram gets values below, on
// and above its bucket bounds.
func recorded(t *testing.T) *metrics.Metrics {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.NewOn(reg)
	reg.MustRegister(scoreTerms{})
	const model, other = "llama-3-8b", "mistral-7b"

	m.RequestsTotal.WithLabelValues(model, "200").Add(40)
	m.RequestsTotal.WithLabelValues(model, "503").Add(2)
	m.RequestsTotal.WithLabelValues(other, "499").Inc()
	for _, v := range []float64{0.03, 0.2, 0.8, 2.5, 7, 45, 400} {
		m.RequestLatency.WithLabelValues(model).Observe(v)
	}
	m.QueueDepth.WithLabelValues(model, "critical").Set(1)
	m.QueueDepth.WithLabelValues(model, "standard").Set(5)
	m.QueueDepth.WithLabelValues(model, "batch").Set(2)
	m.RequestsRejected.WithLabelValues(model, "queue_full").Add(3)
	m.RequestsRejected.WithLabelValues(model, "shed").Inc()
	m.RequestsRejected.WithLabelValues("", "unknown_model").Inc()
	m.RequestsPerNode.WithLabelValues("gpu-0").Add(25)
	m.RequestsPerNode.WithLabelValues("gpu-1").Add(18)
	m.NodeActiveRequests.WithLabelValues("gpu-0").Set(4)
	m.NodeActiveRequests.WithLabelValues("gpu-1").Set(0)
	m.NodeFailures.WithLabelValues("gpu-1").Add(2)
	m.UpstreamErrors.WithLabelValues("503", "gpu-1").Add(2)
	for _, v := range []float64{0.04, 0.05, 0.3, 1.5, 6} {
		m.TimeToFirstToken.WithLabelValues("gpu-0").Observe(v)
	}
	m.TimeToFirstToken.WithLabelValues("gpu-1").Observe(0.12)
	for _, v := range []float64{0.5, 1, 30, 180, 750} {
		m.TokensPerSecond.WithLabelValues("gpu-0").Observe(v)
	}
	m.TokensPerSecond.WithLabelValues("gpu-1").Observe(42)
	m.TokensGenerated.WithLabelValues(model, "gpu-0").Add(1200)
	m.TokensGenerated.WithLabelValues(model, "gpu-1").Add(640)
	m.TokensPrompt.WithLabelValues(model, "gpu-0").Add(300)
	for _, v := range []float64{0.0005, 0.02, 0.7, 12} {
		m.QueueWait.WithLabelValues(model, "standard").Observe(v)
	}
	m.QueueWait.WithLabelValues(model, "batch").Observe(90)
	for _, v := range []float64{0.00003, 0.00008, 0.0004, 0.003, 0.2} {
		m.DecisionDuration.WithLabelValues("scored").Observe(v)
	}
	m.Picks.WithLabelValues("scored", "claimed").Add(42)
	m.Picks.WithLabelValues("scored", "queue_full").Add(3)
	m.ClaimConflicts.Add(2)
	m.StoreRoundTrips.WithLabelValues("claim").Add(45)
	m.StoreRoundTrips.WithLabelValues("release").Add(43)
	m.StoreErrors.WithLabelValues("claim").Inc()
	m.StoreDegraded.Set(1)
	for node, state := range map[string]string{"gpu-0": "healthy", "gpu-1": "unhealthy"} {
		for _, s := range []string{"healthy", "unhealthy", "recovering"} {
			v := 0.0
			if s == state {
				v = 1
			}
			m.NodeHealth.WithLabelValues(node, s).Set(v)
		}
	}
	m.ModelHealthyWorkers.WithLabelValues(model).Set(1)
	m.ModelHealthyWorkers.WithLabelValues(other).Set(0)
	m.QueueCapacity.WithLabelValues(model, "critical").Set(64)
	m.QueueCapacity.WithLabelValues(model, "standard").Set(32)
	m.QueueCapacity.WithLabelValues(model, "batch").Set(16)
	m.Scrapes.WithLabelValues("gpu-0", "ok").Add(10)
	m.Scrapes.WithLabelValues("gpu-1", "error").Add(3)
	m.ScrapeDuration.WithLabelValues("vllm").Observe(0.004)
	m.RetriedElsewhere.WithLabelValues("gpu-1").Inc()
	m.ExtProcStreamsActive.Set(6)
	m.NodeConcurrencyLimit.WithLabelValues("gpu-0").Set(8)
	m.NodeConcurrencyLimit.WithLabelValues("gpu-1").Set(3)
	m.NodePrefixHitRatio.WithLabelValues("gpu-0").Set(0.75)
	m.PredictionErrors(latency.ErrorSummary{Median: 0.12, P90: 0.4, Count: 10}, latency.ErrorSummary{})
	m.FairServiceTokens.WithLabelValues("team-a").Add(3000)
	m.FairServiceTokens.WithLabelValues("team-b").Add(1000)
	for _, v := range []float64{0, 0.02, 0.7, 12} {
		m.FairWait.WithLabelValues("team-a").Observe(v)
	}
	m.FairWait.WithLabelValues("team-b").Observe(90)
	m.FairnessJainIndex.Set(0.8)
	m.FairnessIDsIgnored.Add(2)
	m.Disaggregation.WithLabelValues(model, "disaggregated").Add(3)
	m.Disaggregation.WithLabelValues(model, "aggregated").Inc()
	return m
}

func gather(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// TestExposition compares the exposition of every metric, after the
// observations of recorded, with its golden file testdata/<name>.prom:
// names, help, types, labels and histogram buckets. Run with -update to
// rewrite the files after a deliberate change, and review the diff.
func TestExposition(t *testing.T) {
	m := recorded(t)
	families := gather(t, m)
	var names []string
	for name := range m.Types {
		names = append(names, name)
		if _, ok := families[name]; !ok {
			t.Errorf("%s: nothing recorded; add observations to recorded()", name)
		}
	}
	slices.Sort(names)

	if *update {
		stale, _ := filepath.Glob(filepath.Join("testdata", "*.prom"))
		for _, f := range stale {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range names {
			mf, ok := families[name]
			if !ok {
				continue
			}
			var b bytes.Buffer
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden(name), b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(golden(name))
			if err != nil {
				t.Fatalf("%v (run go test ./metrics -run TestExposition -update)", err)
			}
			if err := compareGolden(families[name], want); err != nil {
				t.Errorf("%v\nif the change is deliberate: go test ./metrics -run TestExposition -update", err)
			}
		})
	}

	files, err := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := m.Types[strings.TrimSuffix(filepath.Base(f), ".prom")]; !ok {
			t.Errorf("%s is the golden file of no metric; delete it", f)
		}
	}
}

func golden(name string) string { return filepath.Join("testdata", name+".prom") }

// compareGolden compares a gathered family with the exposition text of a
// golden file, both parsed and re-encoded so that only content counts, as
// testutil.GatherAndCompare does. (testutil itself needs
// github.com/kylelemons/godebug listed in go.mod, which it is not.)
func compareGolden(got *dto.MetricFamily, golden []byte) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	want, err := p.TextToMetricFamilies(bytes.NewReader(golden))
	if err != nil {
		return fmt.Errorf("parse golden file: %w", err)
	}
	if got == nil || len(want) != 1 || want[got.GetName()] == nil {
		return fmt.Errorf("want exactly the family %s in the golden file, got %d families", got.GetName(), len(want))
	}
	var g, w strings.Builder
	if _, err := expfmt.MetricFamilyToText(&g, got); err != nil {
		return err
	}
	if _, err := expfmt.MetricFamilyToText(&w, want[got.GetName()]); err != nil {
		return err
	}
	if g.String() == w.String() {
		return nil
	}
	return fmt.Errorf("exposition differs from the golden file\n%s", lineDiff(w.String(), g.String()))
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// TestDocumentedBuckets checks the histogram buckets the
// distributed-router brief fixes, independently of the golden files.
func TestDocumentedBuckets(t *testing.T) {
	families := gather(t, recorded(t))
	cases := []struct {
		name string
		want []float64
	}{
		{"llm_router_time_to_first_token_seconds", []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5}},
		{"llm_router_tokens_per_second", []float64{1, 5, 10, 25, 50, 100, 200, 500}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mf, ok := families[c.name]
			if !ok || len(mf.GetMetric()) == 0 {
				t.Fatalf("%s not gathered", c.name)
			}
			var got []float64
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("buckets %v, want %v", got, c.want)
			}
		})
	}
}

// TestNaming checks every metric against the naming conventions: one
// namespace, _total on counters and only on them, _seconds on durations,
// help text, the type Types declares, and promlint.
func TestNaming(t *testing.T) {
	m := recorded(t)
	families := gather(t, m)
	typeNames := map[dto.MetricType]string{
		dto.MetricType_COUNTER:   "counter",
		dto.MetricType_GAUGE:     "gauge",
		dto.MetricType_HISTOGRAM: "histogram",
	}
	durationWords := []string{"latency", "duration", "wait", "time"}
	rules := []struct {
		name string
		ok   func(mf *dto.MetricFamily) bool
	}{
		{"has the llm_router_ prefix", func(mf *dto.MetricFamily) bool {
			return strings.HasPrefix(mf.GetName(), metrics.Namespace+"_")
		}},
		{"ends in _total if and only if a counter", func(mf *dto.MetricFamily) bool {
			return strings.HasSuffix(mf.GetName(), "_total") == (mf.GetType() == dto.MetricType_COUNTER)
		}},
		{"measures a duration in _seconds", func(mf *dto.MetricFamily) bool {
			isDuration := slices.ContainsFunc(durationWords, func(w string) bool { return strings.Contains(mf.GetName(), w) })
			return !isDuration || strings.HasSuffix(mf.GetName(), "_seconds")
		}},
		{"has help text, a sentence", func(mf *dto.MetricFamily) bool {
			h := mf.GetHelp()
			return len(h) > 10 && strings.HasSuffix(h, ".")
		}},
		{"has the type Types declares", func(mf *dto.MetricFamily) bool {
			return m.Types[mf.GetName()] == typeNames[mf.GetType()]
		}},
	}
	for _, name := range sortedKeys(families) {
		mf := families[name]
		for _, r := range rules {
			if !r.ok(mf) {
				t.Errorf("%s (%s, help %q) does not: %s", name, mf.GetType(), mf.GetHelp(), r.name)
			}
		}
	}

	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestExported checks Exported, which the dashboard and alert tests use to
// recognise the series a query may read.
func TestExported(t *testing.T) {
	m := metrics.New()
	cases := []struct {
		series string
		want   bool
	}{
		{"llm_router_requests_total", true},
		{"llm_router_node_score_term", true},
		{"llm_router_request_latency_seconds_bucket", true},
		{"llm_router_request_latency_seconds_sum", true},
		{"llm_router_time_to_first_token_seconds_count", true},
		{"llm_router_requests_total_count", false}, // not a histogram
		{"llm_router_request_latency_seconds_total", false},
		{"llm_router_no_such_metric", false},
		{"go_goroutines", true},
		{"go_no_such_metric", false},
		{"up", false},
	}
	for _, c := range cases {
		if got := m.Exported(c.series); got != c.want {
			t.Errorf("Exported(%q) = %v, want %v", c.series, got, c.want)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
