package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/test/stack"
)

// TestPrometheusScrapesRouter starts a router in this process and a real
// Prometheus server scraping it every second with the shipped scrape job
// and alert rules, then checks through Prometheus's HTTP API that the
// router's metrics arrive with the expected values, that every rule
// evaluates without error and none is pending on a healthy router, that every
// dashboard query runs on this Prometheus version, and that every
// llm_router_ name the router exposes is one package metrics declares.
func TestPrometheusScrapesRouter(t *testing.T) {
	bin := requireTool(t, "prometheus")
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err == nil {
		first, _, _ := strings.Cut(string(out), "\n")
		t.Log(first)
	}

	admin := startRouter(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, scrapeConfig(t, admin), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := stack.MustFreeAddrs(1)[0]
	proc, err := stack.Start("prometheus", bin, []string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + listen,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("prometheus output:\n%s", proc.Log())
		}
	})
	p := promAPI{base: "http://" + listen, proc: proc}
	ctx := context.Background()
	if err := stack.WaitFor(ctx, 30*time.Second, p.ready); err != nil {
		t.Fatalf("prometheus not ready: %v", err)
	}

	// Gauges every router exports from its first snapshot on, read back as
	// Prometheus stored them for this router's target.
	inst := fmt.Sprintf(`job=%q,instance=%q`, routerJob, admin)
	for _, c := range []struct{ query, want string }{
		{`llm_router_store_degraded{` + inst + `}`, "0"},
		{`up{` + inst + `}`, "1"},
		{`llm_router_model_healthy_workers{` + inst + `,model="m"}`, "1"},
		{`llm_router_node_health{` + inst + `,node="w0",state="healthy"}`, "1"},
		{`llm_router_queue_capacity{` + inst + `,model="m",priority="standard"}`, "32"},
	} {
		var got []sample
		err := stack.WaitFor(ctx, 30*time.Second, func() error {
			var err error
			if got, err = p.query(c.query); err != nil {
				return err
			}
			if len(got) == 0 {
				return fmt.Errorf("%s: no sample yet", c.query)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].value() != c.want {
			t.Errorf("%s = %v, want one sample of %s", c.query, got, c.want)
		}
	}

	t.Run("rules evaluate", func(t *testing.T) { checkRules(t, p) })
	t.Run("dashboard queries run", func(t *testing.T) {
		for _, s := range dashboardExprs(t, loadDashboard(t)) {
			q := substitute(s.expr, ".*", map[string]string{"__rate_interval": "1m", "__interval": "1m", "__range": "1h"})
			if _, err := p.query(q); err != nil {
				t.Errorf("%s: %v", s.where, err)
			}
		}
	})
	t.Run("exposed names are declared", func(t *testing.T) {
		var names []string
		if err := p.get("/api/v1/label/__name__/values", url.Values{"match[]": {`{` + inst + `}`}}, &names); err != nil {
			t.Fatal(err)
		}
		// Only the router's own names: the Go and process collectors and
		// promhttp's handler counter come from client_golang.
		m := metrics.New()
		n := 0
		for _, name := range names {
			if !strings.HasPrefix(name, metrics.Namespace+"_") {
				continue
			}
			n++
			if !m.Exported(name) {
				t.Errorf("the router exposes %s, which package metrics does not declare", name)
			}
		}
		if n < 5 {
			t.Errorf("only %d llm_router_ names stored: %v", n, names)
		}
	})
}

// checkRules waits until Prometheus has evaluated every rule of alerts.yml
// at least once, then checks that none failed and no alert is pending or
// firing for a healthy router.
func checkRules(t *testing.T, p promAPI) {
	t.Helper()
	want := len(loadRules(t))
	var rules []promRule
	err := stack.WaitFor(context.Background(), 30*time.Second, func() error {
		var data struct {
			Groups []struct {
				Rules []promRule `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get("/api/v1/rules", nil, &data); err != nil {
			return err
		}
		rules = rules[:0]
		for _, g := range data.Groups {
			rules = append(rules, g.Rules...)
		}
		if len(rules) != want {
			return fmt.Errorf("prometheus loaded %d rules, want %d", len(rules), want)
		}
		for _, r := range rules {
			if r.LastEvaluation.IsZero() {
				return fmt.Errorf("rule %s not evaluated yet", r.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
	}
	var alerts struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &alerts); err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts.Alerts {
		t.Errorf("alert %s is %s for a healthy router: %v", a.Labels["alertname"], a.State, a.Labels)
	}
}

type promRule struct {
	Name           string    `json:"name"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// startRouter runs a router in this process with one worker, a stub that
// answers 200 to every GET (the router's health checks and metrics scrapes;
// no inference request is sent), and returns the router's admin address.
func startRouter(t *testing.T) string {
	t.Helper()
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(worker.Close)
	addrs := stack.MustFreeAddrs(2)
	cfg := config.Default()
	cfg.ExtProcListen, cfg.AdminListen = addrs[0], addrs[1]
	cfg.ReplicaID = "deploy-test"
	cfg.ShutdownGrace = config.Duration(time.Second)
	cfg.Workers = []config.Worker{{ID: "w0", Address: worker.Listener.Addr().String(), Models: []string{"m"}, MaxConcurrency: 2}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := app.New(ctx, cfg, zap.NewNop())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("router stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("router not ready after 30s")
	}
	return cfg.AdminListen
}

// scrapeConfig is prometheus.yml as shipped, with its llm-router job
// pointed at target every second and the rules loaded from this checkout.
func scrapeConfig(t *testing.T, target string) []byte {
	t.Helper()
	raw, err := os.ReadFile(promConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global        map[string]any   `yaml:"global"`
		RuleFiles     []string         `yaml:"rule_files"`
		ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", promConfigFile, err)
	}
	i := slices.IndexFunc(cfg.ScrapeConfigs, func(j map[string]any) bool { return j["job_name"] == routerJob })
	if i < 0 {
		t.Fatalf("%s has no job %s", promConfigFile, routerJob)
	}
	job := cfg.ScrapeConfigs[i]
	if _, ok := job["static_configs"]; !ok {
		t.Fatalf("%s: job %s has no static_configs", promConfigFile, routerJob)
	}
	job["static_configs"] = []any{map[string]any{"targets": []any{target}}}
	cfg.ScrapeConfigs = []map[string]any{job}
	if cfg.Global == nil {
		cfg.Global = map[string]any{}
	}
	cfg.Global["scrape_interval"] = "1s"
	cfg.Global["scrape_timeout"] = "1s"
	cfg.Global["evaluation_interval"] = "1s"
	for i, f := range cfg.RuleFiles {
		abs, err := filepath.Abs(filepath.Join(promDir, f))
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuleFiles[i] = abs
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// promAPI queries a Prometheus server's HTTP API.
type promAPI struct {
	base string
	proc *stack.Proc
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func (p promAPI) ready() error {
	if p.proc.Exited() {
		return stack.Permanent(errors.New("prometheus exited"))
	}
	resp, err := httpClient.Get(p.base + "/-/ready")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready: %s", resp.Status)
	}
	return nil
}

// get fetches an API path and decodes the data of a successful answer
// into out; an error answer is an error carrying Prometheus's message.
func (p promAPI) get(path string, params url.Values, out any) error {
	if p.proc.Exited() {
		return stack.Permanent(errors.New("prometheus exited"))
	}
	u := p.base + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	resp, err := httpClient.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s: %s", path, resp.Status, body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

func (s sample) value() string {
	v, _ := s.Value[1].(string)
	return v
}

// query runs an instant query; a scalar result counts as no series.
func (p promAPI) query(q string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if data.ResultType != "vector" {
		return nil, nil
	}
	var out []sample
	if err := json.Unmarshal(data.Result, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	return out, nil
}
