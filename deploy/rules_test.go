package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const runbookURL = "https://github.com/llm-router/llm-router/blob/main/deploy/prometheus/RUNBOOK.md#"

// TestAlertMetricsExported parses every rule expression and checks that
// every metric it reads is one the router exports (or up, which Prometheus
// writes for every target, or a recording rule of the file).
func TestAlertMetricsExported(t *testing.T) {
	rules := loadRules(t)
	var srcs []exprSource
	for _, r := range rules {
		srcs = append(srcs, exprSource{where: "rule " + r.Alert + r.Record, expr: r.Expr})
	}
	checkExported(t, srcs, recorded(rules))
}

// TestAlerts checks that the alerts operators need exist, read the metric
// they are about, wait as long as documented, and carry a severity, a
// summary, a description and a runbook link to a section that exists.
func TestAlerts(t *testing.T) {
	rules := loadRules(t)
	byName := map[string]rule{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if _, dup := byName[r.Alert]; dup {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		byName[r.Alert] = r
	}
	required := []struct {
		alert   string
		metrics []string
		forDur  string
	}{
		{"LLMRouterWorkerUnhealthy", []string{"llm_router_node_health"}, "1m"},
		{"LLMRouterQueueNearCapacity", []string{"llm_router_queue_depth", "llm_router_queue_capacity"}, "2m"},
		{"LLMRouterHighRejectionRate", []string{"llm_router_requests_rejected_total", "llm_router_requests_total"}, ""},
		{"LLMRouterStoreDegraded", []string{"llm_router_store_degraded"}, ""},
		{"LLMRouterNoHealthyWorker", []string{"llm_router_model_healthy_workers"}, ""},
	}
	for _, req := range required {
		r, ok := byName[req.alert]
		if !ok {
			t.Errorf("alert %s is missing", req.alert)
			continue
		}
		info, err := analyze(r.Expr)
		if err != nil {
			t.Errorf("alert %s: %v", req.alert, err)
			continue
		}
		for _, m := range req.metrics {
			if !slices.Contains(info.metrics, m) {
				t.Errorf("alert %s does not read %s: %s", req.alert, m, r.Expr)
			}
		}
		if req.forDur != "" && r.For != req.forDur {
			t.Errorf("alert %s: for %q, want %q", req.alert, r.For, req.forDur)
		}
	}

	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range byName {
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q, want critical, warning or info", name, r.Labels["severity"])
		}
		if r.For == "" {
			t.Errorf("alert %s has no `for`: one bad scrape would page", name)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", name, a)
			}
		}
		if want := runbookURL + strings.ToLower(name); r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", name, r.Annotations["runbook_url"], want)
		}
		if !bytes.Contains(runbook, []byte("\n## "+name+"\n")) {
			t.Errorf("%s has no section \"## %s\"", runbookFile, name)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllSubmatch(runbook, -1) {
		if _, ok := byName[string(m[1])]; !ok {
			t.Errorf("%s has a section for %s, which is not an alert", runbookFile, m[1])
		}
	}
}

// TestPanelReferences checks that every panel the runbook and the alert
// annotations name in double quotes is a panel of the dashboard.
func TestPanelReferences(t *testing.T) {
	titles := panelTitles(loadDashboard(t))
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{runbookFile: string(runbook)}
	for _, r := range loadRules(t) {
		for k, v := range r.Annotations {
			texts[r.Alert+" "+k] = v
		}
	}
	quoted := regexp.MustCompile(`"([^"\n]+)"`)
	for where, text := range texts {
		for _, m := range quoted.FindAllStringSubmatch(text, -1) {
			if !slices.ContainsFunc(titles, func(title string) bool { return strings.HasPrefix(title, m[1]) }) {
				t.Errorf("%s refers to panel %q; the dashboard has %q", where, m[1], titles)
			}
		}
	}
}

// ruleTests is the part of a promtool rule test file this package reads.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertTestsCoverEveryAlert checks that alerts_test.yml tests every
// alert of alerts.yml both firing and not firing: promtool only runs the
// cases written.
func TestAlertTestsCoverEveryAlert(t *testing.T) {
	b, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatalf("%s: %v", alertTestsFile, err)
	}
	if !slices.Equal(rt.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Errorf("%s tests %v, want [%s]", alertTestsFile, rt.RuleFiles, filepath.Base(alertsFile))
	}
	firing, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if !firing[r.Alert] {
			t.Errorf("%s has no case where %s fires", alertTestsFile, r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("%s has no case where %s must not fire", alertTestsFile, r.Alert)
		}
	}
}

// TestPromtool runs promtool on the rules, their unit tests and the
// configuration, from deploy/prometheus as an operator would.
func TestPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool")
	cases := []struct {
		name string
		args []string
	}{
		{"check rules", []string{"check", "rules", "--lint-fatal", filepath.Base(alertsFile)}},
		{"test rules", []string{"test", "rules", filepath.Base(alertTestsFile)}},
		{"check config", []string{"check", "config", "--lint-fatal", filepath.Base(promConfigFile)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runPromtool(t, promtool, promDir, c.args...)
		})
	}
}

// TestPromtoolKubernetesJob uncomments the Kubernetes job of prometheus.yml,
// puts it in place of the static job, and checks the result with promtool,
// so the commented example stays a valid configuration. Debian's Prometheus
// is built without Kubernetes discovery, so promtool checks the job with
// static targets in place of kubernetes_sd_configs, whose shape this test
// checks itself; TestKubernetesRelabeling checks what the relabeling does.
func TestPromtoolKubernetesJob(t *testing.T) {
	promtool := requireTool(t, "promtool")
	raw, err := os.ReadFile(promConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	job := kubernetesJob(t)
	sd, err := yaml.Marshal(job["kubernetes_sd_configs"])
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(sd)); got != "- role: pod" {
		t.Errorf("kubernetes_sd_configs:\n%s\nwant one pod discovery", got)
	}
	delete(job, "kubernetes_sd_configs")
	job["static_configs"] = []any{map[string]any{"targets": []any{"10.0.0.1:9090"}}}

	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["scrape_configs"] = []any{job}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(alertsFile)), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promtool, dir, "check", "config", "--lint-fatal", "prometheus.yml")
}

// kubernetesJob returns the commented-out Kubernetes job of prometheus.yml.
func kubernetesJob(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(promConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	text, err := commentedJob(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []map[string]any
	if err := yaml.Unmarshal([]byte(text), &jobs); err != nil {
		t.Fatalf("the commented Kubernetes job is not YAML: %v\n%s", err, text)
	}
	if len(jobs) != 1 || jobs[0]["job_name"] != routerJob {
		t.Fatalf("the commented Kubernetes block holds %d jobs (%v), want one named %s", len(jobs), jobs, routerJob)
	}
	return jobs[0]
}

// commentedJob returns the commented-out job between the BEGIN and END
// kubernetes markers, uncommented: the lines from "# - job_name:" on, with
// the comment prefix the first of them has removed.
func commentedJob(cfg string) (string, error) {
	_, rest, ok := strings.Cut(cfg, "# BEGIN kubernetes\n")
	if !ok {
		return "", fmt.Errorf("%s: no \"# BEGIN kubernetes\" marker", promConfigFile)
	}
	block, _, ok := strings.Cut(rest, "# END kubernetes")
	if !ok {
		return "", fmt.Errorf("%s: no \"# END kubernetes\" marker", promConfigFile)
	}
	var out []string
	prefix := ""
	for line := range strings.Lines(block) {
		if prefix == "" {
			i := strings.Index(line, "# - job_name:")
			if i < 0 {
				continue
			}
			prefix = line[:i+2]
		}
		body, ok := strings.CutPrefix(line, prefix)
		if !ok {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return "", fmt.Errorf("%s: line %q of the Kubernetes job does not start with %q", promConfigFile, line, prefix)
		}
		out = append(out, body)
	}
	if prefix == "" {
		return "", fmt.Errorf("%s: no \"# - job_name:\" between the kubernetes markers", promConfigFile)
	}
	return strings.Join(out, ""), nil
}

func runPromtool(t *testing.T, promtool, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}
