// Package discovery keeps the worker registry in step with Kubernetes: the
// pods an InferencePool selects (its selector and target port), or a plain
// label selector, watched with client-go informers. A pod joins when it is
// ready, leaves when it is deleted or stops being ready, and is drained
// (no new requests, the running ones finish) while it terminates. Pods
// carry no model names: every pod serves the models the configuration
// names for the pool, as the reference endpoint picker takes them from the
// pool's configuration.
package discovery

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/llm-router/llm-router/state"
)

// InferencePoolGVR is the Gateway API Inference Extension's pool resource.
var InferencePoolGVR = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// Options say which pods are workers and what each serves.
type Options struct {
	Namespace string
	// Pool names an InferencePool in Namespace whose selector and target
	// port are followed; empty: Selector and TargetPort are used as given.
	Pool       string
	Selector   map[string]string
	TargetPort int
	// Models every discovered pod serves; MaxConcurrency and MetricsFormat
	// apply to each.
	Models         []string
	MaxConcurrency int
	MetricsFormat  string
	Resync         time.Duration
	Logger         *zap.Logger
}

// Watcher reconciles pods into the registry.
type Watcher struct {
	reg  state.Fleet
	opts Options
	log  *zap.Logger

	// serial orders reconciliations: the pod and pool informers deliver
	// on goroutines of their own.
	serial sync.Mutex

	mu       sync.Mutex      // guards the fields below
	selector labels.Selector // nil until the pool is read
	port     int
	known    map[string]member // pod name -> what the registry holds
	pods     cache.Indexer
}

// member is what discovery put in the registry for one pod.
type member struct {
	address  string
	role     state.Role
	draining bool
}

// New returns a watcher; Run starts it.
func New(reg state.Fleet, opts Options) *Watcher {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	w := &Watcher{reg: reg, opts: opts, log: opts.Logger, known: map[string]member{}, port: opts.TargetPort}
	if opts.Pool == "" {
		w.selector = labels.SelectorFromSet(opts.Selector)
	}
	return w
}

// Run watches until ctx ends. dyn may be nil when no pool is followed. It
// returns once the informers have synced and the registry holds every
// ready pod, with the watch going on in the background.
func (w *Watcher) Run(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) error {
	pods := informers.NewSharedInformerFactoryWithOptions(kube, w.opts.Resync, informers.WithNamespace(w.opts.Namespace))
	podInf := pods.Core().V1().Pods().Informer()
	w.mu.Lock()
	w.pods = podInf.GetIndexer()
	w.mu.Unlock()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.podEvent(ctx, obj) },
		UpdateFunc: func(_, obj any) { w.podEvent(ctx, obj) },
		DeleteFunc: func(obj any) { w.podDeleted(ctx, obj) },
	}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	synced := []cache.InformerSynced{podInf.HasSynced}
	if w.opts.Pool != "" {
		if dyn == nil {
			return fmt.Errorf("discovery of pool %s needs a dynamic client", w.opts.Pool)
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, w.opts.Resync, w.opts.Namespace, nil)
		poolInf := f.ForResource(InferencePoolGVR).Informer()
		if _, err := poolInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.poolChanged(ctx, obj) },
			UpdateFunc: func(_, obj any) { w.poolChanged(ctx, obj) },
		}); err != nil {
			return fmt.Errorf("watch inference pools: %w", err)
		}
		f.Start(ctx.Done())
		synced = append(synced, poolInf.HasSynced)
	}
	pods.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("discovery: informers did not sync: %w", ctx.Err())
	}
	w.resyncAll(ctx)
	return nil
}

// poolChanged follows the pool's selector and target port.
func (w *Watcher) poolChanged(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetName() != w.opts.Pool {
		return
	}
	sel, port, err := parsePool(u)
	if err != nil {
		w.log.Warn("inference pool", zap.String("pool", u.GetName()), zap.Error(err))
		return
	}
	w.mu.Lock()
	w.selector, w.port = sel, port
	w.mu.Unlock()
	w.resyncAll(ctx)
}

// parsePool reads an InferencePool (v1): spec.selector.matchLabels and the
// first of spec.targetPorts.
func parsePool(u *unstructured.Unstructured) (labels.Selector, int, error) {
	match, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return nil, 0, fmt.Errorf("spec.selector.matchLabels: %w", err)
	}
	if len(match) == 0 {
		return nil, 0, fmt.Errorf("spec.selector.matchLabels is empty")
	}
	ports, _, err := unstructured.NestedSlice(u.Object, "spec", "targetPorts")
	if err != nil || len(ports) == 0 {
		return nil, 0, fmt.Errorf("spec.targetPorts: want at least one port")
	}
	p, _ := ports[0].(map[string]any)
	n, _, _ := unstructured.NestedInt64(p, "number")
	if n <= 0 || n > 65535 {
		return nil, 0, fmt.Errorf("spec.targetPorts[0].number: bad port %d", n)
	}
	return labels.SelectorFromSet(match), int(n), nil
}

// resyncAll re-evaluates every cached pod, and drops members whose pod is
// gone from the cache or no longer selected.
func (w *Watcher) resyncAll(ctx context.Context) {
	w.serial.Lock()
	defer w.serial.Unlock()
	w.mu.Lock()
	idx := w.pods
	w.mu.Unlock()
	if idx == nil {
		return
	}
	seen := map[string]bool{}
	for _, obj := range idx.List() {
		if p, ok := obj.(*corev1.Pod); ok {
			seen[p.Name] = true
			w.podChanged(ctx, p)
		}
	}
	w.mu.Lock()
	var gone []string
	for name := range w.known {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	w.mu.Unlock()
	for _, name := range gone {
		w.leave(ctx, name, "pod gone")
	}
}

func (w *Watcher) podEvent(ctx context.Context, obj any) {
	w.serial.Lock()
	defer w.serial.Unlock()
	w.podChanged(ctx, obj)
}

func (w *Watcher) podDeleted(ctx context.Context, obj any) {
	w.serial.Lock()
	defer w.serial.Unlock()
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		w.leave(ctx, p.Name, "pod deleted")
	}
}

// podChanged moves one pod's member to where its state says it belongs;
// the caller holds serial.
func (w *Watcher) podChanged(ctx context.Context, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	sel, port := w.selector, w.port
	cur, isMember := w.known[p.Name]
	w.mu.Unlock()
	switch {
	case sel == nil || !sel.Matches(labels.Set(p.Labels)):
		if isMember {
			w.leave(ctx, p.Name, "no longer selected")
		}
	case p.DeletionTimestamp != nil:
		// Terminating: no new requests; those running finish. It leaves
		// when the pod is deleted.
		if isMember && !cur.draining {
			if err := w.reg.SetDraining(ctx, p.Name, true); err != nil {
				w.log.Warn("drain terminating pod", zap.String("pod", p.Name), zap.Error(err))
				return
			}
			w.set(p.Name, member{address: cur.address, role: cur.role, draining: true})
			w.log.Info("worker draining: pod terminating", zap.String("pod", p.Name))
		}
	case !podReady(p):
		if isMember {
			w.leave(ctx, p.Name, "pod not ready")
		}
	default:
		addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
		role := podRole(p.Labels)
		if isMember && cur.address == addr && cur.role == role && !cur.draining {
			return
		}
		spec := state.WorkerSpec{
			ID: p.Name, Address: addr, Models: w.opts.Models, MaxConcurrency: w.opts.MaxConcurrency,
			MetricsFormat: w.opts.MetricsFormat, Zone: p.Labels["topology.kubernetes.io/zone"],
			Region: p.Labels["topology.kubernetes.io/region"], Role: role,
		}
		if err := w.reg.Register(ctx, []state.WorkerSpec{spec}); err != nil {
			w.log.Warn("register pod", zap.String("pod", p.Name), zap.Error(err))
			return
		}
		if cur.draining {
			if err := w.reg.SetDraining(ctx, p.Name, false); err != nil {
				w.log.Warn("undrain pod", zap.String("pod", p.Name), zap.Error(err))
			}
		}
		w.set(p.Name, member{address: addr, role: role})
		w.log.Info("worker joined: pod ready", zap.String("pod", p.Name), zap.String("address", addr))
	}
}

func (w *Watcher) set(name string, m member) {
	w.mu.Lock()
	w.known[name] = m
	w.mu.Unlock()
}

// leave takes a pod's member out of the registry; the caller holds serial.
func (w *Watcher) leave(ctx context.Context, name, why string) {
	w.mu.Lock()
	_, ok := w.known[name]
	delete(w.known, name)
	w.mu.Unlock()
	if !ok {
		return
	}
	if err := w.reg.Deregister(ctx, name); err != nil {
		w.log.Warn("deregister pod", zap.String("pod", name), zap.Error(err))
		return
	}
	w.log.Info("worker left", zap.String("pod", name), zap.String("reason", why))
}

// Members lists the pods discovery holds in the registry (for tests and
// /health).
func (w *Watcher) Members() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.known))
	for name, m := range w.known {
		out[name] = m.address
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
