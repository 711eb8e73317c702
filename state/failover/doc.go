// Package failover wraps the Redis store with an in-memory fallback: while
// Redis is unreachable the replica routes on local state seeded from its
// last snapshot, and reconciles (and repairs writes a promoted replica
// lost) when Redis answers again. It implements state.Store.
package failover
