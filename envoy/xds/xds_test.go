package xds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
)

// TestClustersMatchTheStaticConfig: xDS serves exactly the worker clusters
// the static rendering lists.
func TestClustersMatchTheStaticConfig(t *testing.T) {
	cfg, err := config.Load("../router.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	raw, err := envoy.RenderClusters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Clusters(raw)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*clusterv3.Cluster{}
	for _, r := range cs {
		c := r.(*clusterv3.Cluster)
		names[c.GetName()] = c
	}
	for _, want := range []string{
		"gpu-0", "gpu-1", "gpu-2", "pool.llama-3-8b", "pool.mistral-7b",
		"pool.llama-3-8b.except.gpu-0", "gpu-0.via.llama-3-8b", "gpu-2.via.mistral-7b",
	} {
		if names[want] == nil {
			t.Errorf("no cluster %s (have %d)", want, len(names))
		}
	}
	if agg := names["gpu-0.via.llama-3-8b"]; agg.GetClusterType().GetName() != "envoy.clusters.aggregate" {
		t.Fatalf("failover cluster %+v", agg)
	}
	if len(names["gpu-0"].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()) != 1 {
		t.Fatal("gpu-0 has no endpoint")
	}
}
