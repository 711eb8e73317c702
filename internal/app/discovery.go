package app

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/discovery"
	"github.com/llm-router/llm-router/state"
)

// WithKubernetes gives the router Kubernetes clients for discovery instead
// of the in-cluster ones (tests pass client-go's fakes).
func WithKubernetes(kube kubernetes.Interface, dyn dynamic.Interface) Option {
	return func(o *options) { o.kube, o.dyn = kube, dyn }
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newDiscovery builds the pod watcher when discovery is configured; nil
// otherwise.
func newDiscovery(cfg config.Config, reg state.Fleet, o options, log *zap.Logger) (*discoveryRun, error) {
	d := cfg.Discovery
	if !d.Enabled() {
		return nil, nil
	}
	kube, dyn := o.kube, o.dyn
	if kube == nil {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("discovery needs to run in a cluster: %w", err)
		}
		if kube, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		if dyn, err = dynamic.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
	}
	ns := d.Namespace
	if ns == "" {
		raw, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return nil, fmt.Errorf("discovery.namespace unset and no service account namespace: %w", err)
		}
		ns = strings.TrimSpace(string(raw))
	}
	sel, err := d.Labels()
	if err != nil {
		return nil, err
	}
	w := discovery.New(reg, discovery.Options{
		Namespace: ns, Pool: d.InferencePool, Selector: sel, TargetPort: d.TargetPort,
		Models: d.Models, MaxConcurrency: d.MaxConcurrency, MetricsFormat: d.MetricsFormat,
		Resync: cfg.RefreshInterval.D() * 100, Logger: log,
	})
	return &discoveryRun{w: w, kube: kube, dyn: dyn, log: log}, nil
}

type discoveryRun struct {
	w    *discovery.Watcher
	kube kubernetes.Interface
	dyn  dynamic.Interface
	log  *zap.Logger
}

// run starts the watch; it returns once the registry holds every ready
// pod, and the watch continues until ctx ends.
func (d *discoveryRun) run(ctx context.Context) error {
	if err := d.w.Run(ctx, d.kube, d.dyn); err != nil {
		return err
	}
	d.log.Info("discovery synced", zap.Int("workers", len(d.w.Members())))
	return nil
}
