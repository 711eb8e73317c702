// Package envoy renders the Envoy configuration that fronts the router, from
// the router's own config, so SREs never keep two files in sync by hand.
// The rendered YAML is meant to be read and edited: it is written from a
// commented template (templates/envoy.yaml.tmpl), not marshalled from protos.
//
// Cluster naming, shared with the router, which writes the names into the
// x-llm-cluster header:
//
//   - <worker id>: one worker (the config's id is its cluster name);
//   - pool.<model>: every worker serving the model, LEAST_REQUEST;
//   - pool.<model>.except.<worker id>: the model's other workers;
//   - <worker id>.via.<model>: an aggregate cluster [worker,
//     pool.<model>.except.<worker id>], the router's target. Envoy sends to
//     the worker and, when that fails (connect failure, reset, 503), retries
//     on the next priority: the model's other workers. The failover pool
//     leaves the worker out rather than relying on the previous_hosts retry
//     predicate, which compares host objects and would not recognise the
//     same worker appearing in a second cluster.
package envoy

import (
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/llm-router/llm-router/internal/config"
)

// Version is the Envoy release the rendered config and the tests target;
// the Makefile reads the same file.
//
//go:embed VERSION
var versionFile string

// Version returns the pinned Envoy version, e.g. "1.40.0".
func Version() string { return strings.TrimSpace(versionFile) }

//go:embed templates/envoy.yaml.tmpl
var envoyTemplate string

//go:embed templates/epp.yaml.tmpl
var eppTemplate string

var (
	tmpl = template.Must(template.New("envoy").Funcs(template.FuncMap{
		"quote": strconv.Quote,
	}).Parse(envoyTemplate))
	// The endpoint-picker rendering shares the ext_proc cluster.
	eppTmpl = template.Must(template.Must(tmpl.Clone()).New("epp").Parse(eppTemplate))
)

var slugRe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Slug makes a model name safe inside a cluster name. The router calls it
// on every decision (ClusterFor); names that are already safe, the usual
// case, are returned without running the regexp.
func Slug(model string) string {
	for i := 0; i < len(model); i++ {
		if !slugSafe(model[i]) {
			return slugRe.ReplaceAllString(model, "_")
		}
	}
	return model
}

func slugSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// PoolCluster names the cluster of every worker serving model.
func PoolCluster(model string) string { return "pool." + Slug(model) }

// FailoverCluster names the aggregate [worker, pool of model] cluster.
func FailoverCluster(worker, model string) string { return worker + ".via." + Slug(model) }

// ExceptCluster names the cluster of the model's workers other than worker.
func ExceptCluster(model, worker string) string { return PoolCluster(model) + ".except." + worker }

// ClusterFor is the value the router writes into x-llm-cluster.
func ClusterFor(worker, model string) string { return FailoverCluster(worker, model) }

type endpoint struct {
	Host   string
	Port   int
	Static bool // an IP literal: STATIC cluster; else STRICT_DNS
}

type workerData struct {
	ID string
	endpoint
}

type poolData struct {
	Name    string
	Model   string
	Static  bool
	Members []workerData
}

type aggregateData struct {
	Name, Worker, Model string
	Others              poolData // empty when the worker is the model's only one
}

type data struct {
	XDS               bool
	ExtProcTLS        bool
	ExtProcCAFile     string
	FailOpen          bool
	Version           string
	Listen            endpoint
	Admin             endpoint
	ExtProc           []endpoint
	ExtProcStatic     bool
	BufferLimit       int64
	MessageTimeout    string
	MaxMessageTimeout string
	RouteTimeout      string
	ConnectTimeout    string
	NumRetries        int
	Workers           []workerData
	Pools             []poolData
	Aggregates        []aggregateData
}

// Render returns the Envoy YAML for cfg.
func Render(cfg config.Config) ([]byte, error) {
	d, err := build(cfg)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	t := tmpl
	if cfg.Envoy.Mode == config.ModeEndpointPicker {
		if t, err = eppTmpl, checkIPs(d.Workers); err != nil {
			return nil, err
		}
	}
	if err := t.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("render envoy config: %w", err)
	}
	return append(bytes.TrimRight(buf.Bytes(), "\n"), '\n'), nil
}

func build(cfg config.Config) (data, error) {
	d := data{
		XDS:            cfg.Envoy.Discovery == "xds",
		FailOpen:       cfg.Envoy.FailureModeAllow,
		Version:        Version(),
		BufferLimit:    cfg.MaxBodyBytes + 1<<20,
		MessageTimeout: dur(cfg.Envoy.MessageTimeout.D()),
		// A queued request's body reply comes when a worker frees up: the
		// router extends the timeout (override_message_timeout) up to its
		// longest queue wait plus a margin.
		MaxMessageTimeout: dur(max(cfg.Envoy.MessageTimeout.D(), cfg.Queue.Timeout.Max()+10*time.Second)),
		RouteTimeout:      dur(cfg.Envoy.RouteTimeout.D()),
		ConnectTimeout:    dur(cfg.Envoy.ConnectTimeout.D()),
		NumRetries:        cfg.Envoy.NumRetries,
		ExtProcStatic:     true,
		ExtProcTLS:        cfg.TLS.ExtProc,
		ExtProcCAFile:     cfg.Envoy.ExtProcCAFile,
	}
	var err error
	if d.Listen, err = parseEndpoint(cfg.Envoy.Listen); err != nil {
		return d, fmt.Errorf("envoy.listen: %w", err)
	}
	if d.Admin, err = parseEndpoint(cfg.Envoy.Admin); err != nil {
		return d, fmt.Errorf("envoy.admin: %w", err)
	}
	extprocAddrs := cfg.Envoy.ExtProcAddrs
	if len(extprocAddrs) == 0 {
		extprocAddrs = []string{cfg.ExtProcListen}
	}
	for i, a := range extprocAddrs {
		ep, err := parseEndpoint(a)
		if err != nil {
			return d, fmt.Errorf("envoy.extproc_addrs[%d]: %w", i, err)
		}
		d.ExtProcStatic = d.ExtProcStatic && ep.Static
		d.ExtProc = append(d.ExtProc, ep)
	}
	byModel := map[string][]workerData{}
	for i, w := range cfg.Workers {
		ep, err := parseEndpoint(w.Address)
		if err != nil {
			return d, fmt.Errorf("workers[%d].address: %w", i, err)
		}
		wd := workerData{ID: w.ID, endpoint: ep}
		d.Workers = append(d.Workers, wd)
		for _, m := range w.Models {
			byModel[m] = append(byModel[m], wd)
		}
	}
	for _, w := range cfg.Workers {
		for _, m := range w.Models {
			agg := aggregateData{Name: FailoverCluster(w.ID, m), Worker: w.ID, Model: m}
			agg.Others = poolData{Name: ExceptCluster(m, w.ID), Model: m, Static: true}
			for _, o := range byModel[m] {
				if o.ID != w.ID {
					agg.Others.Members = append(agg.Others.Members, o)
					agg.Others.Static = agg.Others.Static && o.Static
				}
			}
			d.Aggregates = append(d.Aggregates, agg)
		}
	}
	seen := map[string]string{}
	for _, m := range cfg.Models() {
		name := PoolCluster(m)
		if other, dup := seen[name]; dup {
			return d, fmt.Errorf("models %q and %q map to the same Envoy cluster name %q", other, m, name)
		}
		seen[name] = m
		p := poolData{Name: name, Model: m, Static: true, Members: byModel[m]}
		for _, mem := range p.Members {
			p.Static = p.Static && mem.Static
		}
		d.Pools = append(d.Pools, p)
	}
	return d, nil
}

// checkIPs refuses worker host names in endpoint-picker mode: the protocol
// names endpoints by ip:port, and Envoy matches them against its hosts'
// addresses.
func checkIPs(ws []workerData) error {
	for _, w := range ws {
		if !w.Static {
			return fmt.Errorf("workers %s: envoy.mode endpoint_picker needs an ip:port address, got host %q", w.ID, w.Host)
		}
	}
	return nil
}

func parseEndpoint(addr string) (endpoint, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return endpoint{}, fmt.Errorf("bad port in %q", addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return endpoint{Host: host, Port: p, Static: net.ParseIP(host) != nil}, nil
}

// dur formats a duration the way Envoy's YAML wants it: seconds with an s.
func dur(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

//go:embed templates/baseline.yaml.tmpl
var baselineTemplate string

var baselineTmpl = template.Must(template.New("baseline").Parse(baselineTemplate))

// RenderBaseline renders Envoy alone, without the router: every request
// goes to one pool of all the config's workers with lbPolicy (ROUND_ROBIN,
// LEAST_REQUEST, ...). It is the comparison point of the benchmarks: what a
// platform team gets from Envoy without a scheduler.
func RenderBaseline(cfg config.Config, lbPolicy string) ([]byte, error) {
	d, err := build(cfg)
	if err != nil {
		return nil, err
	}
	var all []workerData
	static := true
	for _, w := range d.Workers {
		all = append(all, w)
		static = static && w.Static
	}
	var buf bytes.Buffer
	err = baselineTmpl.Execute(&buf, struct {
		data
		LBPolicy string
		All      []workerData
		Static   bool
	}{d, lbPolicy, all, static})
	if err != nil {
		return nil, fmt.Errorf("render baseline envoy config: %w", err)
	}
	return buf.Bytes(), nil
}

// RenderClusters returns the worker clusters alone (direct, failover pools,
// aggregates) as YAML: what the router serves over xDS in discovery mode
// xds, from the same template as the static config.
func RenderClusters(cfg config.Config) ([]byte, error) {
	d, err := build(cfg)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("clusters:\n")
	if err := tmpl.ExecuteTemplate(&buf, "clusters", d); err != nil {
		return nil, fmt.Errorf("render clusters: %w", err)
	}
	return buf.Bytes(), nil
}
