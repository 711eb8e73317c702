package discovery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/state/memory"
)

const ns = "llm"

func pod(name, ip string, ready bool, lbls map[string]string) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
		},
	}
}

var vllm = map[string]string{"app": "vllm"}

// fleet is the registry's view: worker id -> "address" or "address draining".
func fleet(t *testing.T, reg *memory.Store) map[string]string {
	t.Helper()
	snap, err := reg.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range snap.Workers {
		v := w.Spec.Address
		if w.Draining {
			v += " draining"
		}
		if !slices.Equal(w.Spec.Models, []string{"llama"}) || w.Spec.MaxConcurrency != 4 {
			t.Fatalf("worker %s: models %v, cap %d, want the pool's", w.Spec.ID, w.Spec.Models, w.Spec.MaxConcurrency)
		}
		out[w.Spec.ID] = v
	}
	return out
}

func waitFleet(t *testing.T, reg *memory.Store, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got map[string]string
	for time.Now().Before(deadline) {
		if got = fleet(t, reg); fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("registry %v, want %v", describe(got), describe(want))
}

func describe(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

type setup struct {
	kube *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	reg  *memory.Store
	w    *Watcher
	ctx  context.Context
}

func start(t *testing.T, opts Options, dynObjs []runtime.Object, pods ...runtime.Object) *setup {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube := fake.NewClientset(pods...)
	reg := memory.New(nil, state.Limits{})
	opts.Namespace, opts.Models, opts.MaxConcurrency = ns, []string{"llama"}, 4
	w := New(reg, opts)
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{InferencePoolGVR: "InferencePoolList"}, dynObjs...)
	if err := w.Run(ctx, kube, dyn); err != nil {
		t.Fatal(err)
	}
	return &setup{kube: kube, dyn: dyn, reg: reg, w: w, ctx: ctx}
}

func (s *setup) update(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := s.kube.CoreV1().Pods(ns).Update(s.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Ready selected pods join at start; others wait. A pod that becomes ready
// joins, one that stops being ready leaves, a terminating pod is drained
// and leaves when deleted.
func TestPodsJoinLeaveAndDrain(t *testing.T) {
	s := start(t, Options{Selector: vllm, TargetPort: 8000}, nil,
		pod("p0", "10.0.0.10", true, vllm),
		pod("p1", "10.0.0.11", false, vllm),
		pod("other", "10.0.0.99", true, map[string]string{"app": "web"}),
	)
	waitFleet(t, s.reg, map[string]string{"p0": "10.0.0.10:8000"})

	s.update(t, pod("p1", "10.0.0.11", true, vllm)) // join
	waitFleet(t, s.reg, map[string]string{"p0": "10.0.0.10:8000", "p1": "10.0.0.11:8000"})

	s.update(t, pod("p0", "10.0.0.10", false, vllm)) // not ready: leaves
	waitFleet(t, s.reg, map[string]string{"p1": "10.0.0.11:8000"})

	term := pod("p1", "10.0.0.11", true, vllm) // terminating: drained
	now := metav1.Now()
	term.DeletionTimestamp = &now
	s.update(t, term)
	waitFleet(t, s.reg, map[string]string{"p1": "10.0.0.11:8000 draining"})

	if err := s.kube.CoreV1().Pods(ns).Delete(s.ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, s.reg, map[string]string{})

	// Relabelled out of the selector: leaves too.
	if _, err := s.kube.CoreV1().Pods(ns).Create(s.ctx, pod("p2", "10.0.0.12", true, vllm), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, s.reg, map[string]string{"p2": "10.0.0.12:8000"})
	s.update(t, pod("p2", "10.0.0.12", true, map[string]string{"app": "web"}))
	waitFleet(t, s.reg, map[string]string{})
}

// A pod flapping between ready and not ready ends where its last state
// says, once, with no leftover member; the registry's live state of a
// worker that stayed is untouched by its neighbour's flapping.
func TestFlappingPod(t *testing.T) {
	s := start(t, Options{Selector: vllm, TargetPort: 8000}, nil,
		pod("steady", "10.0.0.1", true, vllm), pod("flap", "10.0.0.2", true, vllm))
	waitFleet(t, s.reg, map[string]string{"steady": "10.0.0.1:8000", "flap": "10.0.0.2:8000"})
	if err := s.reg.SetDraining(s.ctx, "steady", true); err != nil { // an operator's drain
		t.Fatal(err)
	}
	for i := range 20 {
		s.update(t, pod("flap", "10.0.0.2", i%2 == 1, vllm))
	}
	waitFleet(t, s.reg, map[string]string{"steady": "10.0.0.1:8000 draining", "flap": "10.0.0.2:8000"})
	s.update(t, pod("flap", "10.0.0.2", false, vllm))
	waitFleet(t, s.reg, map[string]string{"steady": "10.0.0.1:8000 draining"})
	if m := s.w.Members(); len(m) != 1 || m["steady"] != "10.0.0.1:8000" {
		t.Fatalf("members %v", m)
	}
}

func inferencePool(name string, port int64, match map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1",
		"kind":       "InferencePool",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": match},
			"targetPorts":       []any{map[string]any{"number": port}},
			"endpointPickerRef": map[string]any{"name": "llm-router", "port": map[string]any{"number": int64(9002)}},
		},
	}}
}

// The InferencePool's selector and target port decide; a change of
// selector moves the membership.
func TestInferencePool(t *testing.T) {
	pool := inferencePool("llama-pool", 8000, map[string]any{"app": "vllm"})
	s := start(t, Options{Pool: "llama-pool"}, []runtime.Object{pool, inferencePool("other-pool", 9999, map[string]any{"app": "web"})},
		pod("v0", "10.0.1.1", true, vllm),
		pod("w0", "10.0.1.2", true, map[string]string{"app": "web", "tier": "gpu"}),
	)
	waitFleet(t, s.reg, map[string]string{"v0": "10.0.1.1:8000"})

	moved := inferencePool("llama-pool", 8080, map[string]any{"tier": "gpu"})
	if _, err := s.dyn.Resource(InferencePoolGVR).Namespace(ns).Update(s.ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, s.reg, map[string]string{"w0": "10.0.1.2:8080"})

	if _, _, err := parsePool(inferencePool("bad", 0, map[string]any{"a": "b"})); err == nil {
		t.Fatal("a pool without a port parsed")
	}
}
