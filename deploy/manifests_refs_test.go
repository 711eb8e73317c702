package deploy

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// workload is a Deployment or a StatefulSet: what the cross-reference
// checks read of either.
type workload struct {
	where    string // "Deployment llm-router"
	replicas int32
	selector *metav1.LabelSelector
	template corev1.PodTemplateSpec
	claims   []string // volumeClaimTemplates
}

func workloads(set manifestSet) []workload {
	var out []workload
	for _, m := range set.objects {
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment " + o.Name, replicas(o.Spec.Replicas), o.Spec.Selector, o.Spec.Template, nil})
		case *appsv1.StatefulSet:
			var claims []string
			for _, c := range o.Spec.VolumeClaimTemplates {
				claims = append(claims, c.Name)
			}
			out = append(out, workload{"StatefulSet " + o.Name, replicas(o.Spec.Replicas), o.Spec.Selector, o.Spec.Template, claims})
		}
	}
	return out
}

// replicas is Kubernetes's reading of an unset replica count: 1.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// selects reports whether a label selector matches a pod template.
func selects(t *testing.T, sel *metav1.LabelSelector, tmpl corev1.PodTemplateSpec) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("selector %v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(tmpl.Labels))
}

// matching returns the workloads whose pods a selector picks.
func matching(t *testing.T, ws []workload, sel *metav1.LabelSelector) []workload {
	t.Helper()
	var out []workload
	for _, w := range ws {
		if selects(t, sel, w.template) {
			out = append(out, w)
		}
	}
	return out
}

// containerPort resolves a port reference (a name or a number) to the
// containerPort it means in a pod, if some container declares it.
func containerPort(pod corev1.PodSpec, ref intstr.IntOrString) (int32, bool) {
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if (ref.Type == intstr.String && p.Name == ref.StrVal) || (ref.Type == intstr.Int && p.ContainerPort == ref.IntVal) {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// probePort returns the port a probe checks, if it checks one.
func probePort(p *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case p == nil:
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.GRPC != nil:
		return intstr.FromInt32(p.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

// secretData is a Secret's values, from data and stringData.
func secretData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out
}

// exampleSecret returns the documented Secret every reference must match.
func exampleSecret(t *testing.T, set manifestSet) *corev1.Secret {
	t.Helper()
	for _, m := range set.objects {
		if s, ok := m.obj.(*corev1.Secret); ok && m.file == secretExample {
			return s
		}
	}
	t.Fatalf("%s holds no Secret", secretExample)
	return nil
}

// generatorNames returns the names of every ConfigMap a kustomization
// generates or the manifests declare.
func generatorNames(set manifestSet) map[string]bool {
	out := map[string]bool{}
	for _, k := range set.kustomizations {
		for _, g := range k.ConfigMapGenerator {
			out[g.Name] = true
		}
	}
	for name := range all[corev1.ConfigMap](set) {
		out[name] = true
	}
	return out
}

// TestManifestCrossReferences checks that the objects of the base refer to
// each other correctly: selectors pick pods, named ports exist, and every
// ConfigMap, Secret key, ServiceAccount and volume referred to exists.
func TestManifestCrossReferences(t *testing.T) {
	set := loadManifests(t)
	ws := workloads(set)
	secret := exampleSecret(t, set)
	keys := secretData(secret)
	configMaps := generatorNames(set)
	accounts := all[corev1.ServiceAccount](set)
	services := all[corev1.Service](set)

	for _, w := range ws {
		if !selects(t, w.selector, w.template) {
			t.Errorf("%s: its selector does not match its own pod labels", w.where)
		}
		pod := w.template.Spec
		if sa := pod.ServiceAccountName; sa != "" && accounts[sa] == nil {
			t.Errorf("%s: serviceAccountName %s is not defined", w.where, sa)
		}
		volumes := slices.Clone(w.claims)
		for _, v := range pod.Volumes {
			volumes = append(volumes, v.Name)
			switch {
			case v.ConfigMap != nil && !configMaps[v.ConfigMap.Name]:
				t.Errorf("%s: volume %s mounts ConfigMap %s, which nothing generates", w.where, v.Name, v.ConfigMap.Name)
			case v.Secret != nil:
				if v.Secret.SecretName != secret.Name {
					t.Errorf("%s: volume %s mounts Secret %s, not the documented %s", w.where, v.Name, v.Secret.SecretName, secret.Name)
				}
				for _, it := range v.Secret.Items {
					if _, ok := keys[it.Key]; !ok {
						t.Errorf("%s: volume %s mounts key %s, which %s does not document", w.where, v.Name, it.Key, secretExample)
					}
				}
			}
		}
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			for _, m := range c.VolumeMounts {
				if !slices.Contains(volumes, m.Name) {
					t.Errorf("%s: container %s mounts %s, which is no volume of the pod", w.where, c.Name, m.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if ref.Name != secret.Name {
					t.Errorf("%s: env %s reads Secret %s, not the documented %s", w.where, e.Name, ref.Name, secret.Name)
				}
				if _, ok := keys[ref.Key]; !ok {
					t.Errorf("%s: env %s reads key %s, which %s does not document", w.where, e.Name, ref.Key, secretExample)
				}
			}
			for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
				if ref, ok := probePort(p); ok {
					if _, ok := containerPort(pod, ref); !ok {
						t.Errorf("%s: container %s: %s probe port %s is not a container port", w.where, c.Name, name, ref.String())
					}
				}
			}
		}
	}

	for _, m := range set.objects {
		switch o := m.obj.(type) {
		case *corev1.Service:
			checkService(t, ws, o)
		case *appsv1.StatefulSet:
			if services[o.Spec.ServiceName] == nil {
				t.Errorf("StatefulSet %s: serviceName %s is not a Service of the base", o.Name, o.Spec.ServiceName)
			}
		case *policyv1.PodDisruptionBudget:
			checkPDB(t, ws, o)
		case *networkingv1.NetworkPolicy:
			checkNetworkPolicy(t, ws, o)
		}
	}
}

func checkService(t *testing.T, ws []workload, s *corev1.Service) {
	t.Helper()
	if len(s.Spec.Selector) == 0 {
		t.Errorf("Service %s: no selector", s.Name)
		return
	}
	picked := matching(t, ws, metav1.SetAsLabelSelector(s.Spec.Selector))
	if len(picked) == 0 {
		t.Errorf("Service %s: selector %v matches no Deployment's or StatefulSet's pods", s.Name, s.Spec.Selector)
	}
	if len(s.Spec.Ports) == 0 {
		t.Errorf("Service %s: no ports", s.Name)
	}
	for _, w := range picked {
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			if _, ok := containerPort(w.template.Spec, target); !ok {
				t.Errorf("Service %s: port %s targets %s, which %s does not declare", s.Name, p.Name, target.String(), w.where)
			}
		}
	}
}

func checkPDB(t *testing.T, ws []workload, p *policyv1.PodDisruptionBudget) {
	t.Helper()
	picked := matching(t, ws, p.Spec.Selector)
	if len(picked) != 1 {
		t.Errorf("PodDisruptionBudget %s selects %d workloads, want 1", p.Name, len(picked))
		return
	}
	if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.Type != intstr.Int {
		t.Errorf("PodDisruptionBudget %s: want an integer minAvailable", p.Name)
		return
	}
	if p.Spec.MinAvailable.IntVal >= picked[0].replicas {
		t.Errorf("PodDisruptionBudget %s: minAvailable %d with %d replicas of %s forbids every eviction", p.Name, p.Spec.MinAvailable.IntVal, picked[0].replicas, picked[0].where)
	}
}

func checkNetworkPolicy(t *testing.T, ws []workload, np *networkingv1.NetworkPolicy) {
	t.Helper()
	picked := matching(t, ws, &np.Spec.PodSelector)
	if len(picked) == 0 {
		t.Errorf("NetworkPolicy %s: podSelector matches no pods", np.Name)
	}
	for i, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				continue
			}
			for _, w := range picked {
				if _, ok := containerPort(w.template.Spec, *p.Port); !ok {
					t.Errorf("NetworkPolicy %s: ingress[%d] admits port %s, which %s does not declare", np.Name, i, p.Port.String(), w.where)
				}
			}
		}
		for j, peer := range rule.From {
			if peer.PodSelector != nil && peer.NamespaceSelector == nil && len(matching(t, ws, peer.PodSelector)) == 0 {
				t.Errorf("NetworkPolicy %s: ingress[%d].from[%d] matches no pods of the base", np.Name, i, j)
			}
		}
	}
}

// TestPodSecurity checks every pod of the base against what the
// namespace's restricted Pod Security level and the sizing notes promise:
// non-root, no privilege escalation, no capabilities, a read-only root
// filesystem, RuntimeDefault seccomp, no API token, both probes, and CPU
// and memory requests and limits.
func TestPodSecurity(t *testing.T) {
	set := loadManifests(t)
	ns := all[corev1.Namespace](set)[kubeNamespace]
	if ns == nil {
		t.Fatalf("no Namespace %s", kubeNamespace)
	}
	if level := ns.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		t.Errorf("Namespace %s: pod-security.kubernetes.io/enforce = %q, want restricted", kubeNamespace, level)
	}
	for _, w := range workloads(set) {
		pod := w.template.Spec
		psc := pod.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken must be false: nothing here calls the Kubernetes API", w.where)
		}
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			where := fmt.Sprintf("%s container %s", w.where, c.Name)
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
				t.Errorf("%s: runAsNonRoot is not set", where)
			}
			if (sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) &&
				(psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
				t.Errorf("%s: seccompProfile is not RuntimeDefault", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation must be false", where)
			}
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				t.Errorf("%s: readOnlyRootFilesystem must be true", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities must drop ALL and add none", where)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				if !hasReq || !hasLim {
					t.Errorf("%s: %s needs a request and a limit", where, r)
				} else if req.Cmp(lim) > 0 {
					t.Errorf("%s: %s request %s is above its limit %s", where, r, req.String(), lim.String())
				}
			}
			if c.ReadinessProbe == nil || c.LivenessProbe == nil {
				t.Errorf("%s: needs a readiness and a liveness probe", where)
			}
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }
