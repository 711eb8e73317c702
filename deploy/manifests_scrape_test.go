package deploy

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/internal/config"
)

var unsafeLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// podTarget returns the labels Kubernetes pod discovery gives Prometheus
// for a workload's pod, before relabeling: its labels and annotations,
// and the address of its first declared container port.
func podTarget(w workload) labels.Labels {
	m := map[string]string{
		"__meta_kubernetes_namespace": kubeNamespace,
		"__meta_kubernetes_pod_name":  "pod-0",
		model.MetricsPathLabel:        "/metrics",
		model.AddressLabel:            "10.1.2.3",
	}
	if cs := w.template.Spec.Containers; len(cs) > 0 && len(cs[0].Ports) > 0 {
		m[model.AddressLabel] = net.JoinHostPort("10.1.2.3", strconv.Itoa(int(cs[0].Ports[0].ContainerPort)))
	}
	for k, v := range w.template.Labels {
		m["__meta_kubernetes_pod_label_"+unsafeLabelChars.ReplaceAllString(k, "_")] = v
	}
	for k, v := range w.template.Annotations {
		m["__meta_kubernetes_pod_annotation_"+unsafeLabelChars.ReplaceAllString(k, "_")] = v
	}
	return labels.FromMap(m)
}

// TestPrometheusScrapesRouterPods runs the Kubernetes job of
// prometheus/prometheus.yml on every pod of the base: it keeps the router
// pods, at admin_listen's port and /metrics, and nothing else.
func TestPrometheusScrapesRouterPods(t *testing.T) {
	set := loadManifests(t)
	cfg, err := config.Load(routerConfigFile, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(kubernetesJob(t)["relabel_configs"])
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []*relabel.Config
	if err := yaml.Unmarshal(raw, &cfgs); err != nil {
		t.Fatalf("relabel_configs: %v", err)
	}
	for i, c := range cfgs {
		if err := c.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabel_configs[%d]: %v", i, err)
		}
	}
	wantAddr := net.JoinHostPort("10.1.2.3", strconv.Itoa(int(port(t, cfg.AdminListen))))
	routers := 0
	for _, w := range workloads(set) {
		lb := labels.NewBuilder(podTarget(w))
		keep := relabel.ProcessBuilder(lb, cfgs...)
		isRouter := w.where == "Deployment "+routerDeployment
		if isRouter {
			routers++
		}
		if keep != isRouter {
			t.Errorf("%s: scraped = %v, want %v", w.where, keep, isRouter)
			continue
		}
		if !keep {
			continue
		}
		out := lb.Labels()
		got := fmt.Sprintf("%s%s", out.Get(model.AddressLabel), out.Get(model.MetricsPathLabel))
		if got != wantAddr+"/metrics" {
			t.Errorf("%s is scraped at %s, want %s/metrics (admin_listen)", w.where, got, wantAddr)
		}
	}
	if routers != 1 {
		t.Fatalf("found %d router Deployments, want 1", routers)
	}
}
