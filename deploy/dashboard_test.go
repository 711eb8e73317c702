package deploy

import (
	"slices"
	"strings"
	"testing"
)

// TestDashboardMetricsExported parses every PromQL expression of the
// dashboard (panel targets, nested ones included, and variable queries) and
// checks that every metric it reads is one the router exports.
func TestDashboardMetricsExported(t *testing.T) {
	d := loadDashboard(t)
	srcs := dashboardExprs(t, d)
	if len(srcs) < 20 {
		t.Fatalf("found only %d expressions in %s", len(srcs), dashboardFile)
	}
	checkExported(t, srcs, recorded(loadRules(t)))
}

// TestDashboardSubjects checks that the dashboard keeps a panel for each
// subject operators rely on: deleting one, or pointing it at another
// metric, fails here.
func TestDashboardSubjects(t *testing.T) {
	d := loadDashboard(t)
	quartiles := []float64{0.5, 0.95, 0.99}
	subjects := []struct {
		name      string
		title     []string  // the title contains one of these (any case)
		metrics   []string  // the panel reads every one of these
		panelType string    // "" for any
		by        string    // the panel aggregates by this label
		quantiles []float64 // the panel computes these quantiles
	}{
		{"queue depth against capacity", []string{"queue depth"}, []string{"llm_router_queue_depth", "llm_router_queue_capacity"}, "", "priority", nil},
		{"latency heatmap", []string{"latency"}, []string{"llm_router_request_latency_seconds_bucket"}, "heatmap", "le", nil},
		{"latency quantiles", []string{"latency"}, []string{"llm_router_request_latency_seconds_bucket"}, "timeseries", "", quartiles},
		{"TTFT quantiles per worker", []string{"first token", "ttft"}, []string{"llm_router_time_to_first_token_seconds_bucket"}, "", "node", quartiles},
		{"decode rate per worker", []string{"decode", "tokens/s"}, []string{"llm_router_tokens_per_second_bucket"}, "", "node", nil},
		{"generated tokens rate", []string{"tokens"}, []string{"llm_router_tokens_generated_total"}, "", "node", nil},
		{"throughput by status code", []string{"throughput"}, []string{"llm_router_requests_total"}, "", "code", nil},
		{"active requests per worker", []string{"active requests"}, []string{"llm_router_node_active_requests"}, "", "node", nil},
		{"worker health", []string{"health"}, []string{"llm_router_node_health"}, "", "node", nil},
		{"healthy workers per model", []string{"healthy workers"}, []string{"llm_router_model_healthy_workers"}, "", "model", nil},
		{"rejections by reason", []string{"reject"}, []string{"llm_router_requests_rejected_total"}, "", "reason", nil},
		{"decision latency", []string{"decision"}, []string{"llm_router_decision_duration_seconds_bucket"}, "", "strategy", quartiles},
		{"queue wait", []string{"queue wait"}, []string{"llm_router_queue_wait_seconds_bucket"}, "", "priority", quartiles},
		{"store degraded", []string{"degraded"}, []string{"llm_router_store_degraded"}, "", "", nil},
		{"store errors", []string{"store error"}, []string{"llm_router_store_errors_total"}, "", "op", nil},
		{"claim conflicts", []string{"conflict"}, []string{"llm_router_claim_conflicts_total"}, "", "", nil},
		{"score terms per worker", []string{"score"}, []string{"llm_router_node_score_term"}, "", "node", nil},
	}

	// What each panel reads, from all its targets.
	type read struct {
		p         panel
		metrics   map[string]bool
		grouping  map[string]bool
		quantiles []float64
	}
	var panels []read
	for _, p := range flatten(d.Panels) {
		r := read{p: p, metrics: map[string]bool{}, grouping: map[string]bool{}}
		for _, tg := range p.Targets {
			info, err := analyze(substitute(tg.Expr, "placeholder", builtinVars))
			if err != nil {
				continue // TestDashboardMetricsExported reports it
			}
			for _, m := range info.metrics {
				r.metrics[m] = true
			}
			for _, l := range info.grouping {
				r.grouping[l] = true
			}
			r.quantiles = append(r.quantiles, info.quantiles...)
		}
		panels = append(panels, r)
	}

	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			for _, r := range panels {
				title := strings.ToLower(r.p.Title)
				if !slices.ContainsFunc(s.title, func(w string) bool { return strings.Contains(title, w) }) {
					continue
				}
				if s.panelType != "" && r.p.Type != s.panelType {
					continue
				}
				if slices.ContainsFunc(s.metrics, func(m string) bool { return !r.metrics[m] }) {
					continue
				}
				if s.by != "" && !r.grouping[s.by] {
					continue
				}
				if slices.ContainsFunc(s.quantiles, func(q float64) bool { return !slices.Contains(r.quantiles, q) }) {
					continue
				}
				return
			}
			t.Errorf("no panel with a title containing one of %q reads %v (type %q, by %q, quantiles %v)",
				s.title, s.metrics, s.panelType, s.by, s.quantiles)
		})
	}
}

// TestDashboardPanels checks what makes a panel usable by an operator: a
// unique title, a description, a unit, the datasource variable, and a
// place on the grid that overlaps no other panel.
func TestDashboardPanels(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: want both", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (Grafana 9+ panel types)", d.SchemaVersion)
	}
	ids := map[int]string{}
	titles := map[string]bool{}
	for _, p := range flatten(d.Panels) {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or also used by %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			if len(p.Panels) > 0 && !p.Collapsed {
				t.Errorf("row %q: an expanded row keeps its panels at the top level, not nested", p.Title)
			}
			continue
		}
		if p.Title == "" || titles[p.Title] {
			t.Errorf("panel %d: title %q is empty or not unique", p.ID, p.Title)
		}
		titles[p.Title] = true
		if len(p.Description) < 40 {
			t.Errorf("panel %q: description %q: say what it shows and how to read it", p.Title, p.Description)
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q: no unit (fieldConfig.defaults.unit)", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q is empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s: datasource %+v, want ${datasource}", p.Title, tg.RefID, tg.Datasource)
			}
			if len(p.Targets) > 1 && tg.LegendFormat == "" {
				t.Errorf("panel %q target %s: several queries need legends to tell them apart", p.Title, tg.RefID)
			}
		}
		if p.Type == "heatmap" {
			for _, tg := range p.Targets {
				if tg.Format != "heatmap" {
					t.Errorf("heatmap %q target %s: format %q, want heatmap (so Grafana de-cumulates the buckets)", p.Title, tg.RefID, tg.Format)
				}
			}
		}
	}

	// Overlaps: the top-level layout (rows and expanded panels), then
	// each collapsed row's own panels, which Grafana lays out on expanding.
	layouts := [][]panel{d.Panels}
	for _, p := range d.Panels {
		if p.Type == "row" && p.Collapsed {
			layouts = append(layouts, p.Panels)
		}
	}
	for _, ps := range layouts {
		for i, a := range ps {
			for _, b := range ps[i+1:] {
				if overlap(a.GridPos, b.GridPos) {
					t.Errorf("panels %q %+v and %q %+v overlap", a.Title, a.GridPos, b.Title, b.GridPos)
				}
			}
		}
	}
}

func overlap(a, b gridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// TestDashboardVariables checks the template variables: a Prometheus
// datasource variable every query uses, model and worker filters from
// label_values, and no query using a variable that does not exist (or a
// variable nothing uses).
func TestDashboardVariables(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		t.Errorf("datasource variable %+v: want type datasource, query prometheus", ds)
	}
	for _, name := range []string{"model", "node"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %s variable", name)
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Error(err)
			continue
		}
		m := labelValuesWithMetric.FindStringSubmatch(q)
		if v.Type != "query" || m == nil || m[2] != name {
			t.Errorf("variable %s: type %q query %q, want label_values(<metric>, %s)", name, v.Type, q, name)
		}
		if v.Definition != q {
			t.Errorf("variable %s: definition %q differs from query %q", name, v.Definition, q)
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s: datasource %+v, want ${datasource}", name, v.Datasource)
		}
		// The queries match with =~, so "All" must be a regex.
		if !v.Multi || !v.IncludeAll || v.AllValue != ".*" {
			t.Errorf("variable %s: multi %v includeAll %v allValue %q, want true, true, .*", name, v.Multi, v.IncludeAll, v.AllValue)
		}
	}

	used := map[string]bool{}
	for _, p := range flatten(d.Panels) {
		if p.Datasource != nil {
			for _, r := range referencedVars(p.Datasource.UID) {
				used[r] = true
			}
		}
		for _, tg := range p.Targets {
			for _, r := range referencedVars(tg.Expr) {
				used[r] = true
				if _, ok := vars[r]; !ok && builtinVars[r] == "" {
					t.Errorf("panel %q target %s uses $%s, which is not defined", p.Title, tg.RefID, r)
				}
			}
		}
	}
	for name := range vars {
		if !used[name] {
			t.Errorf("variable %s is used by no panel", name)
		}
	}
}
