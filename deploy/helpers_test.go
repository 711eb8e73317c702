package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/internal/metrics"
)

// The artefacts under test, relative to this package's directory (where go
// test runs).
const (
	dashboardFile  = "grafana/llm-router.json"
	promDir        = "prometheus"
	alertsFile     = "prometheus/alerts.yml"
	alertTestsFile = "prometheus/alerts_test.yml"
	promConfigFile = "prometheus/prometheus.yml"
	runbookFile    = "prometheus/RUNBOOK.md"

	// routerJob is the scrape job name the alerts select on.
	routerJob = "llm-router"
)

// requireTool returns the path of a Prometheus binary. The tests that need
// one fail without it rather than skip, because CI installs it first
// (`make prometheus`); with -short they skip, as they start processes.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("runs %s; skipped with -short", name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not in PATH (%v): `make prometheus` installs Debian's prometheus and promtool", name, err)
	}
	return path
}

// dashboard is the part of a Grafana dashboard model the tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type panel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Datasource  *dsRef   `json:"datasource"`
	GridPos     gridPos  `json:"gridPos"`
	Collapsed   bool     `json:"collapsed"`
	Panels      []panel  `json:"panels"`
	Targets     []target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	RefID        string `json:"refId"`
	Format       string `json:"format"`
	Datasource   *dsRef `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Datasource *dsRef          `json:"datasource"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// flatten returns every panel of the dashboard, rows and the panels of
// collapsed rows included.
func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// queryText returns a query variable's query: Grafana stores either the
// string or, since the Prometheus variable editor, an object holding it.
func (v variable) queryText() (string, error) {
	if len(v.Query) == 0 {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor an object: %w", v.Name, err)
	}
	return o.Query, nil
}

var (
	labelValuesWithMetric = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	labelValuesBare       = regexp.MustCompile(`^label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$`)
	queryResult           = regexp.MustCompile(`^query_result\((.+)\)$`)
)

// variablePromQL returns the PromQL inside a Grafana Prometheus variable
// query: the series selector of label_values(selector, label), the
// expression of query_result(expr), and nothing for label_values(label).
func variablePromQL(q string) (string, error) {
	q = strings.TrimSpace(q)
	if m := labelValuesWithMetric.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	if labelValuesBare.MatchString(q) {
		return "", nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	return "", fmt.Errorf("unsupported variable query %q (want label_values or query_result)", q)
}

// exprSource is one PromQL expression and where it was found.
type exprSource struct {
	where string
	expr  string
}

// dashboardExprs returns every PromQL expression of the dashboard: each
// target of each panel (rows' nested panels included) and each query
// variable's query.
func dashboardExprs(t *testing.T, d dashboard) []exprSource {
	t.Helper()
	var out []exprSource
	for _, p := range flatten(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, exprSource{
				where: fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID),
				expr:  tg.Expr,
			})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Error(err)
			continue
		}
		e, err := variablePromQL(q)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		if e != "" {
			out = append(out, exprSource{where: "variable " + v.Name, expr: e})
		}
	}
	return out
}

// Grafana's built-in variables that can appear in a query, with a value
// valid where they appear (a duration, or a number for the _ms and _s
// forms).
var builtinVars = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "5m",
	"__range":         "1h",
	"__interval_ms":   "300000",
	"__range_ms":      "3600000",
	"__range_s":       "3600",
}

// varRef matches $name, ${name}, ${name:format} and the deprecated [[name]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// referencedVars lists the Grafana variables a query uses.
func referencedVars(q string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(q, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// substitute replaces every Grafana variable in q: the built-in ones by
// their entry in interval, the dashboard's own by value (they only appear
// inside label matcher strings, where any string parses).
func substitute(q, value string, interval map[string]string) string {
	return varRef.ReplaceAllStringFunc(q, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := interval[name]; ok {
			return v
		}
		return value
	})
}

// exprInfo is what the tests read from one parsed expression.
type exprInfo struct {
	metrics   []string  // the metric name of every selector
	grouping  []string  // labels of every `by` clause
	quantiles []float64 // the first argument of every histogram_quantile
}

var promql = parser.NewParser(parser.Options{})

// analyze parses a PromQL expression and collects its metric names (from
// vector and matrix selectors: a matrix selector wraps a vector selector),
// grouping labels and quantiles. A selector without a literal metric name
// is an error: its metrics could not be checked.
func analyze(src string) (exprInfo, error) {
	var info exprInfo
	e, err := promql.ParseExpr(src)
	if err != nil {
		return info, err
	}
	var errs []error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if name == "" && m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				errs = append(errs, fmt.Errorf("selector %s has no literal metric name", n))
				return nil
			}
			info.metrics = append(info.metrics, name)
		case *parser.AggregateExpr:
			if !n.Without {
				info.grouping = append(info.grouping, n.Grouping...)
			}
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" && len(n.Args) > 0 {
				if q, ok := n.Args[0].(*parser.NumberLiteral); ok {
					info.quantiles = append(info.quantiles, q.Val)
				}
			}
		}
		return nil
	})
	return info, errors.Join(errs...)
}

// prometheusSeries are series Prometheus writes itself for every scrape
// target; rules may read them although no router exports them.
var prometheusSeries = map[string]bool{"up": true}

// checkExported parses each expression and reports every metric name it
// reads that the router does not export. extra holds names that are known
// otherwise (recording rules).
func checkExported(t *testing.T, srcs []exprSource, extra map[string]bool) {
	t.Helper()
	m := metrics.New()
	for _, s := range srcs {
		if strings.TrimSpace(s.expr) == "" {
			t.Errorf("%s: empty expression", s.where)
			continue
		}
		q := substitute(s.expr, "placeholder", builtinVars)
		info, err := analyze(q)
		if err != nil {
			t.Errorf("%s: %v\n\t%s", s.where, err, q)
			continue
		}
		if len(info.metrics) == 0 {
			t.Errorf("%s: reads no metric: %s", s.where, s.expr)
		}
		for _, name := range info.metrics {
			if !m.Exported(name) && !prometheusSeries[name] && !extra[name] {
				t.Errorf("%s: reads %s, which the router does not export", s.where, name)
			}
		}
	}
}

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return out
}

// recorded returns the names recording rules define.
func recorded(rules []rule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			out[r.Record] = true
		}
	}
	return out
}

// panelTitles returns every panel title of the dashboard.
func panelTitles(d dashboard) []string {
	var out []string
	for _, p := range flatten(d.Panels) {
		out = append(out, p.Title)
	}
	slices.Sort(out)
	return out
}
