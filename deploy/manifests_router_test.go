package deploy

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llm-router/llm-router/internal/auth"
	"github.com/llm-router/llm-router/internal/config"
)

var update = flag.Bool("update", false, "rewrite kubernetes/envoy.yaml from kubernetes/router.yaml")

const (
	routerConfigFile = "kubernetes/router.yaml"
	envoyConfigFile  = "kubernetes/envoy.yaml"

	routerDeployment = "llm-router"
	envoyDeployment  = "llm-router-envoy"
	// routerConfigMap and envoyConfigMap are configMapGenerators of
	// kubernetes/kustomization.yaml.
	routerConfigMap = "llm-router-config"
	envoyConfigMap  = "llm-router-envoy-config"
	// clusterDomain is the DNS domain the router config's names assume.
	clusterDomain = "svc.cluster.local"
)

// parseRouterConfig loads a router config as the router does, strictly,
// with env as its environment.
func parseRouterConfig(b []byte, env map[string]string) (config.Config, error) {
	return config.Parse(b, func(k string) string { return env[k] })
}

// podEnv returns the environment a container starts with: literal values,
// Secret keys read from the documented example, the pod name and resource
// limits. A key the example lacks is an error unless optional.
func podEnv(t *testing.T, c corev1.Container, podName string, secret *corev1.Secret) map[string]string {
	t.Helper()
	keys := secretData(secret)
	env := map[string]string{}
	for _, e := range c.Env {
		switch from := e.ValueFrom; {
		case from == nil:
			env[e.Name] = e.Value
		case from.SecretKeyRef != nil:
			v, ok := keys[from.SecretKeyRef.Key]
			if !ok && !isTrue(from.SecretKeyRef.Optional) {
				t.Errorf("env %s: %s has no key %s", e.Name, secretExample, from.SecretKeyRef.Key)
			}
			if ok {
				env[e.Name] = v
			}
		case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case from.ResourceFieldRef != nil:
			name, _ := strings.CutPrefix(from.ResourceFieldRef.Resource, "limits.")
			q := c.Resources.Limits[corev1.ResourceName(name)]
			env[e.Name] = strconv.FormatInt(q.Value(), 10)
		default:
			t.Errorf("env %s: a source this test does not resolve", e.Name)
		}
	}
	return env
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

func deployment(t *testing.T, set manifestSet, name string) *appsv1.Deployment {
	t.Helper()
	d := all[appsv1.Deployment](set)[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	return d
}

// port returns the port of a host:port address.
func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func host(t *testing.T, addr string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func namedPort(t *testing.T, pod corev1.PodSpec, name string) int32 {
	t.Helper()
	p, ok := containerPort(pod, intstr.FromString(name))
	if !ok {
		t.Fatalf("no container port named %s", name)
	}
	return p
}

// flagValue returns the argument after the first of names in args.
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		if slices.Contains(names, a) && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// mountedFile checks that file, as a container sees it, is the generated
// ConfigMap's key generated from want (a path relative to deploy/).
func mountedFile(t *testing.T, set manifestSet, pod corev1.PodSpec, c corev1.Container, file, configMap, want string) {
	t.Helper()
	var volume string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap {
			volume = v.Name
		}
	}
	var mountPath string
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			mountPath = m.MountPath
		}
	}
	if volume == "" || mountPath == "" {
		t.Fatalf("container %s does not mount ConfigMap %s", c.Name, configMap)
	}
	if path.Dir(file) != mountPath {
		t.Errorf("container %s reads %s, but ConfigMap %s is mounted at %s", c.Name, file, configMap, mountPath)
	}
	for _, g := range set.kustomizations[kubeDir].ConfigMapGenerator {
		if g.Name != configMap {
			continue
		}
		for _, e := range g.Files {
			key, f := generatorFile(e)
			if key == path.Base(file) && path.Join(kubeDir, f) == want {
				return
			}
		}
	}
	t.Errorf("ConfigMap %s has no key %s generated from %s", configMap, path.Base(file), want)
}

// TestRouterDeployment checks the router's Deployment against its config:
// the config (and the secrets the pod gets) load with config.Load, the
// ports, probes and scrape annotations match the listeners, the ext_proc
// headless Service is the address Envoy is given, the shutdown fits in the
// grace period, and the PodDisruptionBudget and anti-affinity hold.
func TestRouterDeployment(t *testing.T) {
	set := loadManifests(t)
	secret := exampleSecret(t, set)
	d := deployment(t, set, routerDeployment)
	pod := d.Spec.Template.Spec
	c := container(t, d, "llm-router")

	if replicas(d.Spec.Replicas) != 3 {
		t.Errorf("replicas = %d, want 3", replicas(d.Spec.Replicas))
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/llm-router/llm-router:") {
		t.Errorf("image %s, want ghcr.io/llm-router/llm-router:TAG", c.Image)
	}

	// The file alone: valid, and holds no secret.
	fileOnly, err := config.Load(routerConfigFile, func(string) string { return "" })
	if err != nil {
		t.Fatalf("%s: %v", routerConfigFile, err)
	}
	if fileOnly.Admin.Token != "" || fileOnly.Redis.Password != "" || len(fileOnly.Auth.Keys) > 0 {
		t.Errorf("%s holds a credential: keep them in the Secret", routerConfigFile)
	}
	if u, err := url.Parse(fileOnly.Redis.URL); err != nil || u.User != nil {
		t.Errorf("%s: redis.url carries credentials (%v): REDIS_URL from the Secret does", routerConfigFile, err)
	}
	// As the pod sees it.
	env := podEnv(t, c, "llm-router-6f7c9d-x2k4q", secret)
	cfg, err := config.Load(routerConfigFile, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s with the pod's environment: %v", routerConfigFile, err)
	}
	for _, e := range c.Env {
		if slices.Contains([]string{"ADMIN_TOKEN", "REDIS_URL", "REDIS_PASSWORD", "AUTH_TOKEN"}, e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("env %s must come from the Secret", e.Name)
		}
	}
	if cfg.Admin.Token == "" {
		t.Error("the pod gets no admin.token (ADMIN_TOKEN)")
	}
	if cfg.ReplicaID != "llm-router-6f7c9d-x2k4q" {
		t.Errorf("replica_id = %q, want the pod name (REPLICA_ID from metadata.name)", cfg.ReplicaID)
	}

	// Listeners on the pod's address; ports as declared.
	for key, addr := range map[string]string{"extproc_listen": cfg.ExtProcListen, "admin_listen": cfg.AdminListen} {
		if host(t, addr) != "0.0.0.0" {
			t.Errorf("%s = %s: bind 0.0.0.0 so that Envoy, the kubelet and Prometheus reach it", key, addr)
		}
	}
	adminPort, extprocPort := port(t, cfg.AdminListen), port(t, cfg.ExtProcListen)
	if got := namedPort(t, pod, "admin"); got != adminPort {
		t.Errorf("container port admin = %d, admin_listen port %d", got, adminPort)
	}
	if got := namedPort(t, pod, "extproc"); got != extprocPort {
		t.Errorf("container port extproc = %d, extproc_listen port %d", got, extprocPort)
	}

	// Readiness: GET /health on the admin port (503 while draining).
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/health" {
		t.Error("the readiness probe must be GET /health (503 while draining)")
	} else if p, _ := containerPort(pod, rp.HTTPGet.Port); p != adminPort {
		t.Errorf("readiness probe on port %d, want the admin port %d", p, adminPort)
	}
	if lp := c.LivenessProbe; lp != nil && lp.HTTPGet != nil && lp.HTTPGet.Path == "/health" {
		t.Error("liveness on /health would restart replicas that are draining (503)")
	}

	// Shutdown: the kubelet waits longer than the router needs.
	need := cfg.ShutdownDelay.D() + cfg.ShutdownGrace.D()
	if tgps := d.Spec.Template.Spec.TerminationGracePeriodSeconds; tgps == nil || time.Duration(*tgps)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds must exceed shutdown_delay + shutdown_grace = %s", need)
	}

	// Scrape annotations, as deploy/prometheus/prometheus.yml reads them.
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] != strconv.Itoa(int(adminPort)) {
		t.Errorf("pod annotations %v, want prometheus.io/scrape \"true\", path /metrics and port %d (admin_listen)", ann, adminPort)
	}

	// Config and keys files come from their mounts.
	mountedFile(t, set, pod, c, flagValue(c.Args, "--config", "-config"), routerConfigMap, routerConfigFile)
	checkKeysFile(t, pod, c, cfg, secret)

	checkRouterServices(t, set, d, cfg, extprocPort, adminPort)
	checkRouterAvailability(t, set, d)
}

// checkKeysFile checks that auth.keys_file is the Secret's key mounted in
// the container, and that the documented keys load.
func checkKeysFile(t *testing.T, pod corev1.PodSpec, c corev1.Container, cfg config.Config, secret *corev1.Secret) {
	t.Helper()
	kf := cfg.Auth.KeysFile
	if kf == "" {
		t.Fatal("auth.keys_file is not set: client API keys come from the Secret")
	}
	var key string
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name != v.Name || path.Dir(kf) != m.MountPath {
				continue
			}
			for _, it := range v.Secret.Items {
				if it.Path == path.Base(kf) {
					key = it.Key
				}
			}
		}
	}
	if key == "" {
		t.Fatalf("auth.keys_file %s is not a Secret key mounted in the container", kf)
	}
	f := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(f, []byte(secretData(secret)[key]), 0o600); err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	a.KeysFile = f
	if _, err := auth.New(a); err != nil {
		t.Errorf("the keys of %s (%s) do not load: %v", secretExample, key, err)
	}
}

func checkRouterServices(t *testing.T, set manifestSet, d *appsv1.Deployment, cfg config.Config, extprocPort, adminPort int32) {
	t.Helper()
	var headless, admin *corev1.Service
	for _, s := range all[corev1.Service](set) {
		if !selects(t, metav1.SetAsLabelSelector(s.Spec.Selector), d.Spec.Template) {
			continue
		}
		for _, p := range s.Spec.Ports {
			target, _ := containerPort(d.Spec.Template.Spec, p.TargetPort)
			switch {
			case target == extprocPort && s.Spec.ClusterIP == corev1.ClusterIPNone:
				headless = s
			case target == adminPort && s.Spec.Type == corev1.ServiceTypeClusterIP && s.Spec.ClusterIP != corev1.ClusterIPNone:
				admin = s
			}
		}
	}
	if admin == nil {
		t.Error("no ClusterIP Service on the router's admin port")
	}
	if headless == nil {
		t.Fatal("no headless Service (clusterIP: None) on the router's ext_proc port")
	}
	if headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s publishes not-ready addresses: draining replicas would stay in Envoy's cluster", headless.Name)
	}
	want := fmt.Sprintf("%s.%s.%s:%d", headless.Name, kubeNamespace, clusterDomain, headless.Spec.Ports[0].Port)
	if !slices.Equal(cfg.Envoy.ExtProcAddrs, []string{want}) {
		t.Errorf("envoy.extproc_addrs = %v, want [%s]: the headless Service resolves to every replica", cfg.Envoy.ExtProcAddrs, want)
	}
	if headless.Spec.Ports[0].Port != extprocPort {
		t.Errorf("Service %s port %d, want the ext_proc port %d", headless.Name, headless.Spec.Ports[0].Port, extprocPort)
	}
}

func checkRouterAvailability(t *testing.T, set manifestSet, d *appsv1.Deployment) {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	for _, p := range all[policyv1.PodDisruptionBudget](set) {
		if selects(t, p.Spec.Selector, d.Spec.Template) {
			pdb = p
		}
	}
	if pdb == nil {
		t.Error("no PodDisruptionBudget selects the router pods")
	} else if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget %s: minAvailable %v, want 2", pdb.Name, pdb.Spec.MinAvailable)
	}
	spread := false
	if aff := d.Spec.Template.Spec.Affinity; aff != nil && aff.PodAntiAffinity != nil {
		terms := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		for _, term := range terms {
			if term.TopologyKey == "kubernetes.io/hostname" && selects(t, term.LabelSelector, d.Spec.Template) {
				spread = true
			}
		}
	}
	if !spread {
		t.Error("no pod anti-affinity spreads the router replicas across nodes (kubernetes.io/hostname)")
	}
}
