// Package redis is the shared worker-state store: every replica claims
// through the same Redis (single node, Sentinel or Cluster), each
// multi-key operation one Lua script (lua/), so it implements state.Store
// atomically across replicas. Pools shard its keys by worker pool.
package redis
