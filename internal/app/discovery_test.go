package app

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/llm-router/llm-router/internal/config"
)

// Discovered pods reach the scheduler through the process wiring: the
// router is ready with them registered, and a pod that joins later is
// picked.
func TestDiscoveredPodsAreScheduled(t *testing.T) {
	readyPod := func(name, ip string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm", Labels: map[string]string{"app": "vllm"}},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: ip,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	kube := fake.NewClientset(readyPod("vllm-0", "10.1.0.1"))
	cfg := config.Default()
	cfg.ExtProcListen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownDelay = 0
	cfg.Envoy.Mode = config.ModeEndpointPicker
	cfg.Discovery = config.Discovery{Selector: "app=vllm", TargetPort: 8000, Namespace: "llm", Models: []string{"llama"}, MaxConcurrency: 2, MetricsFormat: "none"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := New(ctx, cfg, zap.NewNop(), WithKubernetes(kube, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	if addr, ok := r.Scheduler().AddressOf("vllm-0"); !ok || addr != "10.1.0.1:8000" {
		t.Fatalf("vllm-0 at %q (%v) once ready", addr, ok)
	}
	if _, err := kube.CoreV1().Pods("llm").Create(ctx, readyPod("vllm-1", "10.1.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !r.Scheduler().HasWorker("vllm-1") {
		if time.Now().After(deadline) {
			t.Fatal("a pod that joined later never reached the scheduler")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
