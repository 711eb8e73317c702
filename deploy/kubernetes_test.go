package deploy

import (
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"gopkg.in/yaml.v3"
)

// TestKubernetesRelabeling runs the relabeling of the commented Kubernetes
// job of prometheus.yml on the labels Kubernetes pod discovery gives a
// target, and checks that it keeps exactly the router pods that opt in
// with the documented annotations, at the annotated port and path.
func TestKubernetesRelabeling(t *testing.T) {
	job := kubernetesJob(t)
	raw, err := yaml.Marshal(job["relabel_configs"])
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

	const (
		app      = "__meta_kubernetes_pod_label_app_kubernetes_io_name"
		scrape   = "__meta_kubernetes_pod_annotation_prometheus_io_scrape"
		port     = "__meta_kubernetes_pod_annotation_prometheus_io_port"
		path     = "__meta_kubernetes_pod_annotation_prometheus_io_path"
		podName  = "__meta_kubernetes_pod_name"
		podNS    = "__meta_kubernetes_namespace"
		address  = "__address__"
		mpath    = "__metrics_path__"
		routerPd = "llm-router-6f7c9d-x2k4q"
	)
	// What pod discovery gives every target, before relabeling.
	base := map[string]string{
		address: "10.1.2.3:8080", // a declared container port (ext_proc)
		mpath:   "/metrics",
		app:     "llm-router",
		scrape:  "true",
		port:    "9090",
		podName: routerPd,
		podNS:   "inference",
	}
	cases := []struct {
		name    string
		change  map[string]string // "" deletes the label
		keep    bool
		address string
		path    string
	}{
		{"annotated router pod", nil, true, "10.1.2.3:9090", "/metrics"},
		{"no declared container port", map[string]string{address: "10.1.2.3"}, true, "10.1.2.3:9090", "/metrics"},
		{"path annotation", map[string]string{path: "/admin/metrics"}, true, "10.1.2.3:9090", "/admin/metrics"},
		{"no port annotation keeps the discovered port", map[string]string{port: ""}, true, "10.1.2.3:8080", "/metrics"},
		{"scrape annotation missing", map[string]string{scrape: ""}, false, "", ""},
		{"scrape annotation false", map[string]string{scrape: "false"}, false, "", ""},
		{"another application", map[string]string{app: "vllm"}, false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := map[string]string{}
			for k, v := range base {
				in[k] = v
			}
			for k, v := range c.change {
				if v == "" {
					delete(in, k)
				} else {
					in[k] = v
				}
			}
			lb := labels.NewBuilder(labels.FromMap(in))
			keep := relabel.ProcessBuilder(lb, cfgs...)
			if keep != c.keep {
				t.Fatalf("keep = %v, want %v", keep, c.keep)
			}
			if !keep {
				return
			}
			out := lb.Labels()
			want := map[string]string{address: c.address, mpath: c.path, "namespace": "inference", "pod": routerPd}
			for k, v := range want {
				if got := out.Get(k); got != v {
					t.Errorf("%s = %q, want %q (all: %s)", k, got, v, out)
				}
			}
		})
	}
}
