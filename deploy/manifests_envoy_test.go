package deploy

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
)

// TestEnvoyDeployment checks Envoy's Deployment against the router config
// it is rendered from and the pinned version.
func TestEnvoyDeployment(t *testing.T) {
	set := loadManifests(t)
	d := deployment(t, set, envoyDeployment)
	pod := d.Spec.Template.Spec
	c := container(t, d, "envoy")
	cfg, err := config.Load(routerConfigFile, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if replicas(d.Spec.Replicas) != 2 {
		t.Errorf("replicas = %d, want 2", replicas(d.Spec.Replicas))
	}
	if want := "envoyproxy/envoy:v" + envoy.Version(); c.Image != want {
		t.Errorf("image %s, want %s (envoy/VERSION)", c.Image, want)
	}
	mountedFile(t, set, pod, c, flagValue(slices.Concat(c.Command, c.Args), "--config-path", "-c"), envoyConfigMap, envoyConfigFile)

	listen, admin := port(t, cfg.Envoy.Listen), port(t, cfg.Envoy.Admin)
	for key, addr := range map[string]string{"envoy.listen": cfg.Envoy.Listen, "envoy.admin": cfg.Envoy.Admin} {
		if host(t, addr) != "0.0.0.0" {
			t.Errorf("%s = %s: bind 0.0.0.0 in a pod", key, addr)
		}
	}
	if got := namedPort(t, pod, "http"); got != listen {
		t.Errorf("container port http = %d, envoy.listen port %d", got, listen)
	}
	if ref, ok := probePort(c.ReadinessProbe); !ok {
		t.Error("Envoy has no readiness probe on a port")
	} else if p, _ := containerPort(pod, ref); p != admin {
		t.Errorf("Envoy's readiness probe checks port %d, want envoy.admin's %d", p, admin)
	}
	if cfg.Envoy.Discovery != "xds" {
		t.Errorf("envoy.discovery = %s, want xds: workers registered at run time must be reachable", cfg.Envoy.Discovery)
	}

	// The client-facing Service, on envoy.listen.
	var found bool
	for _, s := range all[corev1.Service](set) {
		if !selects(t, metav1.SetAsLabelSelector(s.Spec.Selector), d.Spec.Template) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if target, _ := containerPort(pod, p.TargetPort); target == listen {
				found = s.Spec.Type == corev1.ServiceTypeClusterIP || s.Spec.Type == corev1.ServiceTypeLoadBalancer
			}
		}
	}
	if !found {
		t.Error("no ClusterIP or LoadBalancer Service on Envoy's listener")
	}

	// Worker threads follow the CPU limit, not the node's core count.
	limit := c.Resources.Limits[corev1.ResourceCPU]
	want := int(math.Ceil(limit.AsApproximateFloat64()))
	if got, _ := strconv.Atoi(flagValue(c.Args, "--concurrency")); got != want {
		t.Errorf("--concurrency %d, want %d (the CPU limit %s)", got, want, limit.String())
	}
}

// TestRedisStatefulSet checks the bundled Redis: the router config's URL
// names its Service, persistence is on, and the documented Secret's URL
// carries the password Redis requires.
func TestRedisStatefulSet(t *testing.T) {
	set := loadManifests(t)
	cfg, err := config.Load(routerConfigFile, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	svcName, ok := strings.CutSuffix(u.Hostname(), "."+kubeNamespace+"."+clusterDomain)
	svc := all[corev1.Service](set)[svcName]
	if !ok || svc == nil {
		t.Fatalf("redis.url host %s is not a Service of the base", u.Hostname())
	}
	if len(svc.Spec.Ports) == 0 || strconv.Itoa(int(svc.Spec.Ports[0].Port)) != u.Port() {
		t.Errorf("redis.url port %s, Service %s ports %v", u.Port(), svc.Name, svc.Spec.Ports)
	}
	var sts *appsv1.StatefulSet
	for _, s := range all[appsv1.StatefulSet](set) {
		if selects(t, metav1.SetAsLabelSelector(svc.Spec.Selector), s.Spec.Template) {
			sts = s
		}
	}
	if sts == nil {
		t.Fatalf("Service %s selects no StatefulSet", svc.Name)
	}
	if replicas(sts.Spec.Replicas) != 1 {
		t.Errorf("StatefulSet %s: %d replicas, want 1 (plain Redis has one primary)", sts.Name, replicas(sts.Spec.Replicas))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if flagValue(c.Args, "--appendonly") != "yes" {
		t.Errorf("Redis args %v lack --appendonly yes", c.Args)
	}
	if flagValue(c.Args, "--maxmemory-policy") != "noeviction" {
		t.Errorf("Redis args %v lack --maxmemory-policy noeviction: evicted claims or leases would corrupt the state", c.Args)
	}
	dir := flagValue(c.Args, "--dir")
	var persisted bool
	for _, m := range c.VolumeMounts {
		for _, claim := range sts.Spec.VolumeClaimTemplates {
			persisted = persisted || (m.Name == claim.Name && m.MountPath == dir)
		}
	}
	if !persisted {
		t.Errorf("Redis's --dir %q is not a volumeClaimTemplate's mount", dir)
	}

	keys := secretData(exampleSecret(t, set))
	su, err := url.Parse(keys["redis-url"])
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := su.User.Password()
	if su.Host != u.Host || pw != keys["redis-password"] || pw == "" {
		t.Errorf("the example redis-url %s must be redis.url's host with redis-password", keys["redis-url"])
	}
	if flagValue(c.Args, "--requirepass") != "$(REDIS_PASSWORD)" {
		t.Errorf("Redis args %v: want --requirepass $(REDIS_PASSWORD)", c.Args)
	}
}

// TestKubernetesEnvoyConfigIsRendered keeps kubernetes/envoy.yaml equal to
// `llm-router envoy-config --config deploy/kubernetes/router.yaml`, and
// checks that the router's shutdown_delay outlasts the time the rendered
// Envoy takes to stop sending to a replica that is shutting down.
func TestKubernetesEnvoyConfigIsRendered(t *testing.T) {
	cfg, err := config.Load(routerConfigFile, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got, err := envoy.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(envoyConfigFile, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(envoyConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("deploy/%s is stale: run `go test ./deploy -run TestKubernetesEnvoyConfigIsRendered -update` (or `llm-router envoy-config --config deploy/%s > deploy/%s`)", envoyConfigFile, routerConfigFile, envoyConfigFile)
	}

	detect, how, err := extprocDetection(got)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ShutdownDelay.D() <= detect {
		t.Errorf("shutdown_delay %s must exceed the %s Envoy needs to notice a replica shutting down (%s)", cfg.ShutdownDelay, detect, how)
	}
}

// extprocDetection returns how long the rendered Envoy takes, at worst, to
// stop sending new streams to a router replica that turned NOT_SERVING:
// its active health checks on llm_router_extproc when it has some, else
// the DNS path (the pod leaves the headless Service's answer, CoreDNS's
// 5 s TTL, Envoy's 5 s STRICT_DNS refresh, a second of propagation).
func extprocDetection(rendered []byte) (time.Duration, string, error) {
	var boot struct {
		StaticResources struct {
			Clusters []struct {
				Name         string `yaml:"name"`
				HealthChecks []struct {
					Timeout            string `yaml:"timeout"`
					Interval           string `yaml:"interval"`
					NoTrafficInterval  string `yaml:"no_traffic_interval"`
					UnhealthyThreshold int    `yaml:"unhealthy_threshold"`
				} `yaml:"health_checks"`
			} `yaml:"clusters"`
		} `yaml:"static_resources"`
	}
	if err := yaml.Unmarshal(rendered, &boot); err != nil {
		return 0, "", err
	}
	for _, c := range boot.StaticResources.Clusters {
		if c.Name != "llm_router_extproc" {
			continue
		}
		if len(c.HealthChecks) == 0 {
			return 11 * time.Second, "no health checks: DNS", nil
		}
		var worst time.Duration
		for _, hc := range c.HealthChecks {
			var d [3]time.Duration
			for i, s := range []string{hc.Interval, hc.NoTrafficInterval, hc.Timeout} {
				if s == "" {
					continue
				}
				v, err := time.ParseDuration(s)
				if err != nil {
					return 0, "", fmt.Errorf("llm_router_extproc health check: %w", err)
				}
				d[i] = v
			}
			n := max(hc.UnhealthyThreshold, 1)
			worst = max(worst, time.Duration(n)*(max(d[0], d[1])+d[2]))
		}
		return worst, "unhealthy_threshold × (interval + timeout)", nil
	}
	return 0, "", fmt.Errorf("the rendered config has no llm_router_extproc cluster")
}
