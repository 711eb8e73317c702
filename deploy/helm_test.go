package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/llm-router/llm-router/internal/config"
)

const (
	chartDir    = "helm/llm-router"
	examplesDir = "helm/examples"
)

// The custom resources the chart and examples use whose Go types this
// module does not import: strict local mirrors of the fields used, after
// the CRDs (InferencePool inference.networking.k8s.io/v1 of the Gateway API
// Inference Extension, ServiceMonitor monitoring.coreos.com/v1, Istio's
// DestinationRule networking.istio.io/v1). A field they lack fails.
type (
	inferencePool struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			TargetPorts []struct {
				Number int `json:"number"`
			} `json:"targetPorts"`
			EndpointPickerRef struct {
				Group string `json:"group,omitempty"`
				Kind  string `json:"kind,omitempty"`
				Name  string `json:"name"`
				Port  struct {
					Number int `json:"number"`
				} `json:"port"`
				FailureMode string `json:"failureMode,omitempty"`
			} `json:"endpointPickerRef"`
		} `json:"spec"`
	}
	serviceMonitor struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port      string `json:"port"`
				Path      string `json:"path"`
				Interval  string `json:"interval"`
				Scheme    string `json:"scheme,omitempty"`
				TLSConfig *struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify"`
				} `json:"tlsConfig,omitempty"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	destinationRule struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Host          string `json:"host"`
			TrafficPolicy struct {
				TLS struct {
					Mode               string `json:"mode"`
					InsecureSkipVerify bool   `json:"insecureSkipVerify"`
				} `json:"tls"`
			} `json:"trafficPolicy"`
		} `json:"spec"`
	}
)

var helmKinds = func() map[string]func() any {
	m := maps.Clone(kinds)
	m["rbac.authorization.k8s.io/v1 Role"] = func() any { return new(rbacv1.Role) }
	m["rbac.authorization.k8s.io/v1 RoleBinding"] = func() any { return new(rbacv1.RoleBinding) }
	m["monitoring.coreos.com/v1 ServiceMonitor"] = func() any { return new(serviceMonitor) }
	m["inference.networking.k8s.io/v1 InferencePool"] = func() any { return new(inferencePool) }
	m["gateway.networking.k8s.io/v1 Gateway"] = func() any { return new(gatewayv1.Gateway) }
	m["gateway.networking.k8s.io/v1 HTTPRoute"] = func() any { return new(gatewayv1.HTTPRoute) }
	m["networking.istio.io/v1 DestinationRule"] = func() any { return new(destinationRule) }
	return m
}()

func decodeHelm(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	key := tm.APIVersion + " " + tm.Kind
	newObj, ok := helmKinds[key]
	if !ok {
		return nil, fmt.Errorf("unsupported apiVersion/kind %q", key)
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return obj, nil
}

// helm runs the pinned Helm (internal/tools/go.mod).
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("runs helm; skipped with -short")
	}
	cmd := exec.Command("go", append([]string{"tool", "-modfile=../internal/tools/go.mod", "helm"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		t.Fatal(err)
	}
	return out
}

// TestHelmChart lints the chart, renders it with the values operators
// change, decodes every object strictly, and loads the rendered router.yaml
// as the router would.
func TestHelmChart(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	for _, tc := range []struct {
		name string
		set  []string
		want []string // kinds the rendering must hold
		not  []string
		// fallbacks is the envoy.fallbacks the router must get: 0 by
		// default, the one value every gateway routes on (an ORIGINAL_DST
		// cluster reads x-gateway-destination-endpoint as one address).
		fallbacks int
	}{
		{"defaults", nil, []string{"Deployment", "Service", "ConfigMap", "Role", "RoleBinding", "ServiceAccount", "PodDisruptionBudget"}, []string{"ServiceMonitor"}, 0},
		{"selector, external redis, monitor, own certificate", []string{
			"inferencePool.name=", "inferencePool.selector=app=vllm", "inferencePool.targetPort=8080",
			"redis.enabled=false", "redis.urlSecret.name=redis", "serviceMonitor.enabled=true",
			"router.tls.secretName=router-tls", "router.tls.admin=true", "dashboard.enabled=false",
			"router.fallbacks=2",
		}, []string{"ServiceMonitor"}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "llm-router", chartDir, "--namespace", "llm"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			docs, err := splitDocuments(helm(t, args...))
			if err != nil {
				t.Fatal(err)
			}
			kindsSeen := map[string]int{}
			var routerYAML string
			var deploy *appsv1.Deployment
			for i, doc := range docs {
				obj, err := decodeHelm(doc)
				if err != nil {
					t.Errorf("document %d: %v", i, err)
					continue
				}
				typ := fmt.Sprintf("%T", obj)
				kindsSeen[strings.ToLower(typ[strings.LastIndex(typ, ".")+1:])]++
				if o, ok := obj.(metav1.Object); ok && o.GetNamespace() != "llm" {
					t.Errorf("%T %s: namespace %q", obj, o.GetName(), o.GetNamespace())
				}
				switch o := obj.(type) {
				case *corev1.ConfigMap:
					if y, ok := o.Data["router.yaml"]; ok {
						routerYAML = y
					}
					if d, ok := o.Data["llm-router.json"]; ok {
						want, err := os.ReadFile(dashboardFile)
						if err != nil {
							t.Fatal(err)
						}
						if strings.TrimSpace(d) != strings.TrimSpace(string(want)) {
							t.Error("the dashboard ConfigMap differs from " + dashboardFile)
						}
					}
				case *appsv1.Deployment:
					if o.Name == "llm-router" {
						deploy = o
					}
				case *serviceMonitor:
					if len(o.Spec.Endpoints) != 1 || o.Spec.Endpoints[0].Port != "admin" || o.Spec.Endpoints[0].Scheme != "https" {
						t.Errorf("ServiceMonitor endpoints %+v", o.Spec.Endpoints)
					}
				}
			}
			for _, k := range tc.want {
				if kindsSeen[strings.ToLower(k)] == 0 {
					t.Errorf("no %s rendered (got %v)", k, kindsSeen)
				}
			}
			for _, k := range tc.not {
				if kindsSeen[strings.ToLower(k)] != 0 {
					t.Errorf("%s rendered though off by default", k)
				}
			}
			if deploy == nil {
				t.Fatal("no llm-router Deployment")
			}
			env := map[string]string{"REDIS_URL": "redis://redis:6379/0", "POD_NAMESPACE": "llm"}
			cfg, err := parseRouterConfig([]byte(routerYAML), env)
			if err != nil {
				t.Fatalf("rendered router.yaml: %v\n%s", err, routerYAML)
			}
			if cfg.Envoy.Mode != config.ModeEndpointPicker || !cfg.TLS.ExtProc || !cfg.Discovery.Enabled() || len(cfg.Discovery.Models) == 0 {
				t.Errorf("rendered config: mode %s, tls %v, discovery %+v", cfg.Envoy.Mode, cfg.TLS.ExtProc, cfg.Discovery)
			}
			if cfg.Redis.URL == "" {
				t.Error("rendered config has no Redis")
			}
			if cfg.Envoy.Fallbacks != tc.fallbacks {
				t.Errorf("rendered config: envoy.fallbacks %d, want %d", cfg.Envoy.Fallbacks, tc.fallbacks)
			}
			if (cfg.TLS.CertFile != "") != slices.Contains(tc.set, "router.tls.secretName=router-tls") {
				t.Errorf("certificate files %q with %v", cfg.TLS.CertFile, tc.set)
			}
		})
	}
}

// TestHelmExamplesDecode decodes the Envoy Gateway and Istio examples
// strictly and checks that they attach the chart's Service to the pool.
func TestHelmExamplesDecode(t *testing.T) {
	for _, f := range []string{"envoy-gateway.yaml", "istio.yaml"} {
		b, err := os.ReadFile(examplesDir + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitDocuments(b)
		if err != nil {
			t.Fatal(err)
		}
		var pool *inferencePool
		var route *gatewayv1.HTTPRoute
		for i, doc := range docs {
			obj, err := decodeHelm(doc)
			if err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
				continue
			}
			switch o := obj.(type) {
			case *inferencePool:
				pool = o
			case *gatewayv1.HTTPRoute:
				route = o
			}
		}
		if pool == nil || route == nil {
			t.Fatalf("%s: needs an InferencePool and an HTTPRoute", f)
		}
		if ref := pool.Spec.EndpointPickerRef; ref.Name != "llm-router" || ref.Port.Number != 9002 {
			t.Errorf("%s: endpointPickerRef %+v, want the chart's Service llm-router:9002", f, ref)
		}
		be := route.Spec.Rules[0].BackendRefs[0]
		if string(be.Name) != pool.Name || be.Kind == nil || *be.Kind != "InferencePool" {
			t.Errorf("%s: the route's backend is not the pool", f)
		}
	}
}
