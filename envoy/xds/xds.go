// Package xds serves Envoy the worker clusters over ADS (aggregated
// discovery) when envoy.discovery is xds, so workers registered at run time
// are reachable without re-rendering Envoy's config. The clusters are the
// very ones the static config would list: rendered from the same template,
// for the current registry, then read into Envoy's cluster protos.
package xds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3" // the failover clusters' type
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
)

// everyNode gives every Envoy the same snapshot: the clusters depend on the
// fleet, not on which Envoy asks.
type everyNode struct{}

func (everyNode) ID(*corev3.Node) string { return "fleet" }

// Server is the ADS server.
type Server struct {
	cache cachev3.SnapshotCache
	srv   serverv3.Server
	log   *zap.Logger

	mu      sync.Mutex
	version string
}

// New returns a server with an empty snapshot until the first Update.
func New(ctx context.Context, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	cache := cachev3.NewSnapshotCache(true, everyNode{}, nil)
	return &Server{cache: cache, srv: serverv3.NewServer(ctx, cache, nil), log: log}
}

// Register adds the ADS service to a gRPC server (the ext_proc one: Envoy
// already connects to every replica there).
func (s *Server) Register(g *grpc.Server) {
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, s.srv)
}

// Version is the version of the clusters served (a hash of them).
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Update serves the clusters for cfg's workers, if they changed.
func (s *Server) Update(ctx context.Context, cfg config.Config) error {
	raw, err := envoy.RenderClusters(cfg)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	version := hex.EncodeToString(sum[:8])
	s.mu.Lock()
	defer s.mu.Unlock()
	if version == s.version {
		return nil
	}
	clusters, err := Clusters(raw)
	if err != nil {
		return err
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.ClusterType: clusters})
	if err != nil {
		return fmt.Errorf("xds snapshot: %w", err)
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("xds snapshot: %w", err)
	}
	if err := s.cache.SetSnapshot(ctx, "fleet", snap); err != nil {
		return fmt.Errorf("xds snapshot: %w", err)
	}
	s.version = version
	s.log.Info("serving worker clusters", zap.String("version", version), zap.Int("clusters", len(clusters)))
	return nil
}

// Clusters reads rendered cluster YAML ("clusters: [...]") into protos.
func Clusters(raw []byte) ([]types.Resource, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("clusters yaml: %w", err)
	}
	var doc struct {
		Clusters []json.RawMessage `json:"clusters"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("clusters json: %w", err)
	}
	out := make([]types.Resource, 0, len(doc.Clusters))
	for i, c := range doc.Clusters {
		var cl clusterv3.Cluster
		if err := protojson.Unmarshal(c, &cl); err != nil {
			return nil, fmt.Errorf("cluster %d: %w", i, err)
		}
		if err := cl.ValidateAll(); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.GetName(), err)
		}
		out = append(out, &cl)
	}
	return out, nil
}
